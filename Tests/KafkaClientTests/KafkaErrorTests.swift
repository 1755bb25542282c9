import CRdKafka
import Logging
import Testing

@testable import KafkaClient

@Suite("Kafka errors and configuration")
struct KafkaErrorTests {
    @Test func classifiesRetriableAndFatalCodes() {
        #expect(KafkaError.from(code: RD_KAFKA_RESP_ERR__QUEUE_FULL).isRetriable)
        #expect(KafkaError.from(code: RD_KAFKA_RESP_ERR__MSG_TIMED_OUT).kind == .deliveryTimeout)
        #expect(KafkaError.from(code: RD_KAFKA_RESP_ERR__TRANSPORT).isRetriable)
        let fatal = KafkaError.from(code: RD_KAFKA_RESP_ERR__FATAL)
        #expect(fatal.isFatal && !fatal.isRetriable)
        let tooLarge = KafkaError.from(code: RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
        #expect(!tooLarge.isFatal && !tooLarge.isRetriable)
        #expect(tooLarge.description.contains("MSG_SIZE_TOO_LARGE"))
    }

    /// A group member or producer id the broker forgot ends the process (exit 75) like the broker
    /// state watch; a transport error or a timeout does not.
    @Test func aForgottenMemberOrProducerMeansTheBrokerLostItsState() {
        for code in [RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID, RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID, RD_KAFKA_RESP_ERR__FENCED] {
            #expect(KafkaError.from(code: code).meansBrokerStateLost, "\(KafkaError.from(code: code))")
        }
        for code in [RD_KAFKA_RESP_ERR__TRANSPORT, RD_KAFKA_RESP_ERR__MSG_TIMED_OUT, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART] {
            #expect(!KafkaError.from(code: code).meansBrokerStateLost, "\(KafkaError.from(code: code))")
        }
    }

    @Test func badPropertyIsAConfigurationErrorNamingIt() {
        var config = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: "127.0.0.1:1"))
        config.client.properties["linger.ms"] = "not-a-number"
        do {
            _ = try KafkaProducer(configuration: config, logger: Logger(label: "t"))
            Issue.record("expected a configuration error")
        } catch {
            #expect(error.kind == .configuration)
            #expect(error.description.contains("linger.ms"))
        }
    }

    @Test func producerDefaultsAreIdempotentWithAcksAll() {
        let props = KafkaProducerConfiguration(client: KafkaConfiguration(bootstrapServers: "b:1")).properties
        #expect(props["enable.idempotence"] == "true")
        #expect(props["acks"] == "all")
    }

    @Test func consumerCommitsManually() {
        let props = KafkaConsumerConfiguration(client: KafkaConfiguration(bootstrapServers: "b:1"), groupId: "g", topics: ["t"]).properties
        #expect(props["enable.auto.commit"] == "false")
        #expect(props["session.timeout.ms"] == "6000")
    }

    @Test func batchNextOffsetsArePerPartitionMaxPlusOne() {
        let batch = KafkaMessageBatch(messages: [
            KafkaMessage(topic: "t", partition: 0, offset: 5, key: nil, value: nil),
            KafkaMessage(topic: "t", partition: 0, offset: 6, key: nil, value: nil),
            KafkaMessage(topic: "t", partition: 1, offset: 2, key: nil, value: nil),
        ])
        #expect(batch.nextOffsets == [TopicPartition(topic: "t", partition: 0): 7, TopicPartition(topic: "t", partition: 1): 3])
    }

    @Test func librdkafkaIsAtLeast28() {
        let parts = librdkafkaVersion.split(separator: ".").compactMap { Int($0) }
        #expect(parts.count >= 2 && (parts[0] > 2 || (parts[0] == 2 && parts[1] >= 8)), "librdkafka \(librdkafkaVersion)")
    }

    @Test("the producer polls until every admitted enqueue has handed its messages over, then flushes")
    func producerPollsUntilAdmittedEnqueuesFinish() {
        var producer = ProducerStateMachine()
        let started = producer.start()
        let admitted = producer.beginEnqueue()
        #expect(started && admitted)
        producer.beginDraining()
        // Shutdown began while a send was between its check and librdkafka: polling goes on.
        let admittedAfterShutdown = producer.beginEnqueue()
        #expect(!admittedAfterShutdown)
        #expect(producer.mustPoll)
        producer.endEnqueue()
        #expect(!producer.mustPoll)
    }

    @Test func stateMachinesRefuseWorkAfterShutdown() {
        var producer = ProducerStateMachine()
        let started = producer.start()
        let startedTwice = producer.start()
        #expect(started && !startedTwice)
        producer.beginDraining()
        #expect(!producer.acceptsWork)
        // Shut down before it ran: it runs once, to flush, and only once.
        var early = ProducerStateMachine()
        early.beginDraining()
        let earlyStarted = early.start()
        let earlyStartedTwice = early.start()
        #expect(earlyStarted && !earlyStartedTwice && !early.mustPoll && !early.acceptsWork)
        var consumer = ConsumerStateMachine()
        let consumerStarted = consumer.start()
        #expect(consumerStarted)
        consumer.stop()
        #expect(!consumer.isPolling)
    }
}
