#ifndef CRDKAFKA_SHIM_H
#define CRDKAFKA_SHIM_H
// librdkafka >= 2.8 (deploy/local/install.sh builds it into .local/librdkafka).
#include <librdkafka/rdkafka.h>
// The in-process mock cluster, used by the Kafka client's unit tests.
#include <librdkafka/rdkafka_mock.h>
#endif
