"""Checks docker-compose.yml, its Dockerfile and its Prometheus and Grafana files without a
container engine (none runs where this is developed).

1. The Compose Specification JSON schema ($COMPOSE_SPEC, else deploy/compose/compose-spec.json:
   the compose-spec project's published schema, Apache License 2.0, kept in the repository so the
   check needs nothing outside it).
2. Images: every image is pinned (no `latest`, no untagged image).
3. The Dockerfile: build targets exist; the products it builds are exactly the package's
   executables (`swift package dump-package`); every command a service runs is one of them.
4. Commands: a project service runs a real product, with subcommands and `--options` that the
   built product's `--help` lists (the products of $BIN_DIR, else of `swift build --show-bin-path`).
5. Environment: every variable given to a project service is one docs/CONFIGURATION.md says that
   product reads (a test holds that table equal to the code; `KEY_FILE` counts as `KEY`); every
   `KEY_FILE` names a platform secret (what `attendancectl secrets init --json` makes, run into a
   scratch folder) inside a volume the service mounts, and every secret the table says the product
   reads reaches it.
6. The local stack: each long-running service listens on the port the native stack gives it,
   publishes it, is health-checked on `/health/ready` there, and gets the variables the native
   stack gives it, and no setting of its own beyond them (both from `deploy/local/services.sh describe`).
7. Dependencies: `depends_on` names real services; a `service_healthy` condition waits for a
   service that has a health check; every long-running service waits for the secrets and topics
   jobs and for PostgreSQL to be healthy (each service applies its own migrations at start); every
   service that is not a one-shot job (`restart: "no"`) restarts unless stopped, the broker and the
   database included; PostgreSQL's `max_connections` is the local stack's.
8. Prometheus scrapes exactly the long-running services on their ports and sends its alerts to the
   Alertmanager service, whose configuration amtool accepts; Grafana has a data source and dashboards;
   every metric a dashboard panel or an alert rule queries is exported by the code.

Prints one line per failure and `compose check: N passed, M failed`.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import jsonschema
import yaml

# Metrics the libraries export (Hummingbird's MetricsMiddleware, Prometheus itself).
LIBRARY_METRICS = {"hb_requests", "hb_request_errors", "http_server_request_duration", "http_server_active_requests", "up"}
PROMQL_WORDS = {"by", "without", "and", "or", "unless", "offset", "bool", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
JOB_NAMES = {"secrets", "topics"}
# What every service gets alike, in compose through its shared blocks (x-kafka-env, x-postgres-env, x-service-env).
PLATFORM_VARIABLES = {"KAFKA_BROKERS", "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "DATABASE_URL", "HTTP_HOST", "HTTP_PORT",
                      "LOG_FORMAT", "LOG_LEVEL"}



def publishes(service, port):
    """Whether the service publishes `port` as itself, on every interface or on the one a `${..._BIND:-...}`
    prefix names."""
    return any(str(p) == f"{port}:{port}" or str(p).endswith(f":{port}:{port}") for p in service.get("ports") or [])

class Checker:
    def __init__(self, root, compose_path, spec_path):
        self.root = root
        self.compose_path = compose_path
        self.spec_path = spec_path
        self.results = []
        # (alert rule name, its labels), read with the Prometheus rule files.
        self.alert_labels = []

    def check(self, name, ok, detail=""):
        self.results.append((name, bool(ok), detail))

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def read(self, *parts):
        with open(self.path(*parts)) as f:
            return f.read()

    # --- sources ---------------------------------------------------------------------------

    def sources(self, folders):
        chunks = []
        for folder in folders:
            for dirpath, _, files in os.walk(self.path(folder)):
                for file in sorted(files):
                    if file.endswith(".swift"):
                        with open(os.path.join(dirpath, file)) as f:
                            chunks.append(f.read())
        return "\n".join(chunks)

    def known_metrics(self):
        code = self.sources(["Services", "Shared"])
        names = set(re.findall(r'(?:Counter|Gauge|Timer|Recorder|Meter|FloatingPointCounter)\(\s*label:\s*"([a-z_:][a-z0-9_:]*)"', code))
        names |= set(re.findall(r'make(?:Counter|Gauge|DurationHistogram|ValueHistogram|FloatingPointCounter)\(\s*name:\s*"([a-z_:][a-z0-9_:]*)"', code))
        names |= set(re.findall(r'metricName:\s*"([a-z_:][a-z0-9_:]*)"', code))
        return names | LIBRARY_METRICS

    # --- facts, by running what holds them -------------------------------------------------------

    def run_tool(self, name, arguments, stdout_only=False, **kwargs):
        """Runs a command of the repository; (exit code, output). A missing program is a failure."""
        try:
            result = subprocess.run(arguments, capture_output=True, text=True, cwd=self.root, timeout=300, **kwargs)
        except (OSError, subprocess.TimeoutExpired) as error:
            self.check(name, False, str(error))
            return 1, ""
        return result.returncode, result.stdout if stdout_only else result.stdout + result.stderr

    def package_executables(self):
        """The shipped executables: the package's executable products (benchmarks are targets only)."""
        # Its stdout only: a SwiftPM running beside it says on stderr that it waits for it.
        status, output = self.run_tool("swift package dump-package", ["swift", "package", "dump-package"], stdout_only=True)
        try:
            products = json.loads(output)["products"] if status == 0 else []
        except (ValueError, KeyError, TypeError):
            products = []
        self.check("swift package dump-package lists the products", products, output[-400:])
        return {p["name"] for p in products if "executable" in (p.get("type") or {})}

    def built_products(self):
        """Where the built executables are: $BIN_DIR, else `swift build --show-bin-path`."""
        folder = os.environ.get("BIN_DIR")
        if not folder:
            status, output = self.run_tool("swift build --show-bin-path", ["swift", "build", "--show-bin-path"], stdout_only=True)
            folder = output.strip().splitlines()[-1] if status == 0 and output.strip() else ""
        for product in sorted(self.executables):
            self.check(f"{product} is built in {folder} (swift build)", os.access(os.path.join(folder, product), os.X_OK))
        return folder

    def platform_secrets(self):
        """The platform's secrets, variable -> file name: what `attendancectl secrets init` makes."""
        scratch = tempfile.mkdtemp(prefix="compose-check-secrets-")
        try:
            status, output = self.run_tool(
                "attendancectl secrets init", [os.path.join(self.bin_dir, "attendancectl"), "secrets", "init", "--dir", scratch, "--json"],
                stdout_only=True)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        try:
            rows = json.loads(output) if status == 0 else []
        except ValueError:
            rows = []
        self.check("attendancectl secrets init lists the platform's secrets", rows, output[-400:])
        return {row["variable"]: row["secret"] for row in rows if isinstance(row, dict) and "variable" in row and "secret" in row}

    def local_stack(self):
        """The native stack's services: name -> (port, the variables each gets beyond every service's)."""
        status, output = self.run_tool(
            "services.sh describe", ["bash", self.path("deploy", "local", "services.sh"), "describe"], env=self.clean_environment())
        services = {}
        for line in output.splitlines() if status == 0 else []:
            words = line.split()
            if len(words) >= 2 and words[1].isdigit():
                services[words[0]] = (words[1], words[2:])
        self.check("services.sh describe names the long-running services", services, output[-400:])
        return services

    def local_environment(self):
        """The variable names deploy/local/env.sh exports."""
        status, output = self.run_tool(
            "deploy/local/env.sh", ["bash", "-c", 'source deploy/local/env.sh >/dev/null 2>&1 && env'], env=self.clean_environment())
        return {line.split("=", 1)[0] for line in output.splitlines() if "=" in line} if status == 0 else set()

    @staticmethod
    def clean_environment():
        # The scripts' own defaults, not whatever the caller's shell (or a test's stack) overrides.
        return {k: v for k, v in os.environ.items() if k in ("HOME", "PATH", "TERM", "LANG", "BUILD_CACHE_DIR")}

    # --- the checks ----------------------------------------------------------------------------

    def run(self):
        try:
            with open(self.compose_path) as f:
                compose = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as error:
            self.check(f"read {self.compose_path}", False, str(error))
            return
        if not isinstance(compose, dict):
            self.check(f"read {self.compose_path}", False, "not a YAML mapping")
            return

        self.schema(compose)
        # The facts compose must agree with, each from the one place that holds it, by running it.
        self.executables = self.package_executables()
        self.bin_dir = self.built_products()
        self.secrets = self.platform_secrets()
        local = self.local_stack()
        local_ports = {name: port for name, (port, _) in local.items()}
        services = compose.get("services") or {}
        self.services = services

        project_images = {s.get("image") for s in services.values() if isinstance(s, dict) and "build" in s}
        dockerfile_products = set()
        long_running = []
        for name, service in services.items():
            if not isinstance(service, dict):
                continue
            image = service.get("image")
            if image:
                tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else None
                self.check(f"{name}: image pinned", tag not in (None, "latest"), image)
            project = "build" in service or image in project_images
            if "build" in service:
                dockerfile_products |= self.dockerfile(name, service["build"])
            command = service.get("command")
            product = command[0] if isinstance(command, list) and command else None
            if service.get("restart") != "no":
                self.check(f"{name}: restarts unless stopped (after a crash or a host restart)", service.get("restart") == "unless-stopped",
                           f"restart: {service.get('restart')}")
            logging = service.get("logging") or {}
            self.check(f"{name}: its log is bounded (json-file with max-size and max-file)",
                       logging.get("driver") == "json-file" and {"max-size", "max-file"} <= set((logging.get("options") or {}).keys()),
                       f"logging: {logging}")
            for dependency, condition in self.dependencies(service):
                self.check(f"{name}: depends_on {dependency} exists", dependency in services)
                if condition == "service_healthy" and dependency in services:
                    self.check(f"{name}: waits for {dependency} to be healthy, which has a health check", "healthcheck" in services[dependency])
            if not project:
                continue
            self.check(f"{name}: command '{product}' is a product", product in self.executables, f"executables: {sorted(self.executables)}")
            if product in self.executables:
                self.command_arguments(name, product, command[1:])
            self.environment(name, product, service)
            if service.get("restart") != "no" and name not in JOB_NAMES:
                long_running.append(name)
                self.long_running(name, service, local.get(name))

        if dockerfile_products:
            self.check("Dockerfile builds every executable product", dockerfile_products == self.executables,
                       f"built {sorted(dockerfile_products)}, executables {sorted(self.executables)}")
            for name, service in services.items():
                command = service.get("command") if isinstance(service, dict) else None
                if isinstance(command, list) and command and command[0] in self.executables:
                    self.check(f"{name}: the image holds '{command[0]}'", command[0] in dockerfile_products)

        # PostgreSQL takes as many connections as on the local stack, whose services' pools fill it alike.
        stack = self.read("deploy", "local", "stack.sh")
        local_max = re.search(r'PG_SERVER_MAX_CONNECTIONS="\$\{PG_SERVER_MAX_CONNECTIONS:-(\d+)\}"', stack)
        postgres_command = " ".join(str(a) for a in ((services.get("postgres") or {}).get("command") or []))
        compose_max = re.search(r"max_connections=(\d+)", postgres_command)
        self.check("postgres: max_connections is the local stack's (stack.sh PG_SERVER_MAX_CONNECTIONS)",
                   local_max is not None and compose_max is not None and local_max.group(1) == compose_max.group(1),
                   f"compose: {postgres_command or '(image default 100)'}")

        # The containers get the platform's variables as the local stack does.
        exported = self.local_environment()
        for key in ["KAFKA_BROKERS", "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "DATABASE_URL"]:
            self.check(f"local stack exports {key}", key in exported)

        if "prometheus" in services:
            self.prometheus(services["prometheus"], long_running, local_ports)
        else:
            self.check("a prometheus service", False)
        if "grafana" in services:
            self.grafana(services["grafana"])
        else:
            self.check("a grafana service", False)
        if "alertmanager" in services:
            self.alertmanager(services["alertmanager"])
        else:
            self.check("an alertmanager service", False)

    def schema(self, compose):
        if os.path.exists(self.spec_path):
            with open(self.spec_path) as f:
                schema = json.load(f)
            errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
            self.check("compose schema", not errors, "; ".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]))
        else:
            self.check("compose schema", False, f"schema not found at {self.spec_path} (set COMPOSE_SPEC)")

    def dockerfile(self, name, build):
        dockerfile = os.path.join(self.root, build.get("context", "."), build.get("dockerfile", "Dockerfile"))
        exists = os.path.exists(dockerfile)
        self.check(f"{name}: Dockerfile exists", exists, dockerfile)
        if not exists:
            return set()
        text = open(dockerfile).read()
        if "target" in build:
            stages = re.findall(r"(?im)^FROM\s+\S+\s+AS\s+(\S+)", text)
            self.check(f"{name}: build target '{build['target']}' exists", build["target"] in stages, f"stages: {stages}")
        products = set(re.findall(r"--product\s+(\S+)", text))
        for loop in re.findall(r"for product in ([A-Za-z0-9 _-]+); do", text):
            products |= set(loop.split())
        products = {p for p in products if not p.startswith('"')}
        for product in sorted(products):
            self.check(f"Dockerfile product '{product}' is an executable", product in self.executables)
        self.check(f"{name}: the Dockerfile builds with a static Swift standard library", "--static-swift-stdlib" in text)
        return products

    @staticmethod
    def dependencies(service):
        depends = service.get("depends_on") or {}
        if isinstance(depends, list):
            return [(d, None) for d in depends]
        return [(d, (c or {}).get("condition")) for d, c in depends.items()]

    def command_arguments(self, name, product, arguments):
        """The subcommands and options of a compose command, as the built product's `--help` lists them."""
        positional = []
        for argument in arguments:
            if argument.startswith("--"):
                break
            positional.append(argument)
        options = [a.split("=", 1)[0] for a in arguments if a.startswith("--")]
        if not positional and not options:
            return
        status, output = self.run_tool(f"{name}: {product} --help", [os.path.join(self.bin_dir, product)] + positional + ["--help"])
        # An unknown subcommand with --help prints its parent's help: the usage line names the whole command.
        command = " ".join([product] + positional)
        self.check(f"{name}: '{command}' is a command of {product}", status == 0 and re.search(rf"USAGE: {re.escape(command)}(\s|$)", output), output[-400:])
        for option in options:
            self.check(f"{name}: option {option} exists in '{command}'", re.search(rf"{re.escape(option)}\b", output) is not None)

    def documented_variables(self):
        """docs/CONFIGURATION.md's table: variable -> who reads it (ConfigurationVocabularyTests holds
        the table equal to what the code reads)."""
        if not hasattr(self, "_documented"):
            text = self.read("docs", "CONFIGURATION.md").split("## Variables", 1)[-1].split("\n## ", 1)[0]
            self._documented = dict(re.findall(r"^\| `([A-Z][A-Z0-9_]+)` \| ([^|]+) \|", text, re.M))
        return self._documented

    # Who the table says reads a variable, as compose names the product.
    READERS = {"gateway": "ingest-gateway", "policy": "policy-service", "merger": "session-merger", "registry": "beacon-registry",
               "telemetry": "telemetry-aggregator", "CLI": "attendancectl", "fleet simulator": "fleet-simulator"}

    def reads(self, product, variable):
        """Whether docs/CONFIGURATION.md says `product` reads `variable`."""
        readers = self.documented_variables().get(variable)
        return readers is not None and ("every service" in readers and product != "attendancectl" or
                                        any(self.READERS.get(r.strip()) == product for r in readers.split(",")) or
                                        ("CLI" in readers and product == "attendancectl"))

    def environment(self, name, product, service):
        environment = service.get("environment")
        if isinstance(environment, dict):
            items = [(k, v) for k, v in environment.items() if k != "<<"]
        elif isinstance(environment, list):
            items = [tuple(entry.split("=", 1)) if "=" in entry else (entry, None) for entry in environment]
        else:
            items = []
        mounts = [str(v).split(":")[1] for v in (service.get("volumes") or []) if isinstance(v, str) and ":" in v]
        for key, value in items:
            base = key[:-5] if key.endswith("_FILE") else key
            self.check(f"{name}: env {key} is one {product} reads (docs/CONFIGURATION.md)", self.reads(product, base),
                       f"read by: {self.documented_variables().get(base)}")
            if key.endswith("_FILE"):
                path = str(value)
                self.check(f"{name}: {base} is a platform secret (attendancectl secrets init)", base in self.secrets)
                self.check(f"{name}: {key} is inside a mounted volume", any(path.startswith(m.rstrip("/") + "/") for m in mounts), f"{path} not under {mounts}")
                self.check(f"{name}: {key} names the file of {base}", os.path.basename(path) == self.secrets.get(base), path)
        # A secret the product reads must reach it (a missing GATT key silently turns the challenge off).
        given = given_variables(k for k, _ in items)
        for variable in sorted(v for v in self.secrets if self.reads(product, v)):
            self.check(f"{name}: gets the secret {variable} it reads", variable in given)

    def long_running(self, name, service, local):
        environment = service.get("environment") or {}
        port = str(environment.get("HTTP_PORT", ""))
        expected, variables = local or (None, [])
        self.check(f"{name}: HTTP_PORT {port or '(unset)'} is the local stack's port {expected}", expected is not None and port == expected)
        published = [str(p) for p in (service.get("ports") or [])]
        self.check(f"{name}: publishes {port}", publishes(service, port), f"ports: {published}")
        test = (service.get("healthcheck") or {}).get("test") or []
        command = " ".join(test) if isinstance(test, list) else str(test)
        self.check(f"{name}: health check on /health/ready at {port}", f"127.0.0.1:{port}/health/ready" in command, command)
        self.check(f"{name}: HTTP_HOST listens beyond loopback", environment.get("HTTP_HOST") == "0.0.0.0")
        given = given_variables(environment)
        for variable in variables:
            self.check(f"{name}: gets {variable} as on the local stack (services.sh describe)", variable in given)
        # And nothing else of its own: a setting only compose gives is a platform that behaves otherwise there.
        for variable in sorted(given - set(variables) - PLATFORM_VARIABLES):
            self.check(f"{name}: {variable} is given on the local stack too (services.sh describe)", False)
        waits_for = {d for d, c in self.dependencies(service) if c == "service_completed_successfully"}
        self.check(f"{name}: waits for the secrets and topics jobs", JOB_NAMES <= waits_for, f"waits for {sorted(waits_for)}")
        healthy = {d for d, c in self.dependencies(service) if c == "service_healthy"}
        self.check(f"{name}: waits for postgres to be healthy (it migrates at start)", "postgres" in healthy, f"waits for {sorted(healthy)}")

    def prometheus(self, service, long_running, local_ports):
        mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in (service.get("volumes") or []) if isinstance(v, str) and ":" in v}
        config_dir = mounts.get("/etc/prometheus")
        self.check("prometheus: its configuration folder is mounted", config_dir is not None)
        if config_dir is None:
            return
        # Relative volume paths are relative to the project directory, the repository root.
        folder = os.path.normpath(os.path.join(self.root, config_dir))
        try:
            config = yaml.safe_load(open(os.path.join(folder, "prometheus.yml")))
        except (OSError, yaml.YAMLError) as error:
            self.check("prometheus: prometheus.yml", False, str(error))
            return
        self.promtool_config(folder, config)
        # The alerts' timing: promtool's rule unit tests beside the rules.
        if os.path.exists(os.path.join(folder, "alerts.test.yml")):
            self.run_promtool("promtool test rules (alerts.test.yml)", ["test", "rules", os.path.join(folder, "alerts.test.yml")])
        else:
            self.check("prometheus: alerts.test.yml beside the rules", False)
        targets = {}
        for job in config.get("scrape_configs") or []:
            for static in job.get("static_configs") or []:
                for target in static.get("targets") or []:
                    host, _, port = target.partition(":")
                    targets[host] = port
                    self.check(f"prometheus: job '{job.get('job_name')}' is named after its service", job.get("job_name") == host)
        for name in long_running:
            self.check(f"prometheus scrapes {name} on {local_ports.get(name)}", targets.get(name) == local_ports.get(name), f"targets: {targets}")
        for host in targets:
            self.check(f"prometheus target {host} is a long-running service", host in long_running)
        alertmanagers = [
            target
            for manager in (config.get("alerting") or {}).get("alertmanagers") or []
            for static in manager.get("static_configs") or []
            for target in static.get("targets") or []
        ]
        self.check("prometheus: alerts go to alertmanager:9093", alertmanagers == ["alertmanager:9093"], f"{alertmanagers}")
        metrics = self.known_metrics()
        for rule_file in config.get("rule_files") or []:
            local = os.path.join(folder, os.path.relpath(rule_file, "/etc/prometheus"))
            try:
                rules = yaml.safe_load(open(local))
            except (OSError, yaml.YAMLError) as error:
                self.check(f"prometheus: rule file {rule_file}", False, str(error))
                continue
            for group in rules.get("groups") or []:
                for rule in group.get("rules") or []:
                    self.alert_labels.append((rule.get("alert"), {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}))
                    self.expression(f"alert {rule.get('alert')}", rule.get("expr", ""), metrics)
                    runbook = (rule.get("annotations") or {}).get("runbook", "")
                    self.runbook_anchor(f"alert {rule.get('alert')}", runbook)

    def grafana(self, service):
        mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in (service.get("volumes") or []) if isinstance(v, str) and ":" in v}
        provisioning = mounts.get("/etc/grafana/provisioning")
        dashboards = mounts.get("/var/lib/grafana/dashboards")
        self.check("grafana: provisioning is mounted", provisioning is not None)
        self.check("grafana: dashboards are mounted", dashboards is not None)
        if provisioning is None or dashboards is None:
            return
        base = self.root
        datasources = os.path.join(base, provisioning, "datasources")
        found = []
        for file in sorted(os.listdir(datasources)) if os.path.isdir(datasources) else []:
            for source in (yaml.safe_load(open(os.path.join(datasources, file))) or {}).get("datasources") or []:
                found.append(source)
        self.check("grafana: a Prometheus data source at http://prometheus:9090",
                   any(s.get("type") == "prometheus" and s.get("url") == "http://prometheus:9090" for s in found))
        uids = {s.get("uid") for s in found}
        providers = os.path.join(base, provisioning, "dashboards")
        paths = []
        for file in sorted(os.listdir(providers)) if os.path.isdir(providers) else []:
            for provider in (yaml.safe_load(open(os.path.join(providers, file))) or {}).get("providers") or []:
                paths.append((provider.get("options") or {}).get("path"))
        self.check("grafana: a dashboard provider reads the mounted folder", "/var/lib/grafana/dashboards" in paths, f"{paths}")
        home = (service.get("environment") or {}).get("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH")
        if home:
            self.check("grafana: the home dashboard exists", os.path.exists(os.path.join(base, dashboards, os.path.relpath(home, "/var/lib/grafana/dashboards"))), home)
        metrics = self.known_metrics()
        folder = os.path.join(base, dashboards)
        files = sorted(f for f in os.listdir(folder) if f.endswith(".json")) if os.path.isdir(folder) else []
        self.check("grafana: dashboards", len(files) > 0)
        queries = []
        for file in files:
            try:
                dashboard = json.load(open(os.path.join(folder, file)))
            except ValueError as error:
                self.check(f"dashboard {file}: JSON", False, str(error))
                continue
            self.check(f"dashboard {file}: uid, title and panels", dashboard.get("uid") and dashboard.get("title") and dashboard.get("panels"))
            for panel in dashboard.get("panels") or []:
                source = (panel.get("datasource") or {}).get("uid")
                self.check(f"dashboard {file} panel '{panel.get('title')}': data source '{source}' is provisioned", source in uids)
                for target in panel.get("targets") or []:
                    self.expression(f"dashboard {file} panel '{panel.get('title')}'", target.get("expr", ""), metrics)
                    queries.append((f"{file} panel '{panel.get('title')}' {target.get('refId')}", target.get("expr", "")))
        self.promtool_queries(queries)

    def alertmanager(self, service):
        mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in (service.get("volumes") or []) if isinstance(v, str) and ":" in v}
        config_dir = mounts.get("/etc/alertmanager")
        self.check("alertmanager: its configuration folder is mounted", config_dir is not None)
        self.check("alertmanager: reads the mounted configuration",
                   "--config.file=/etc/alertmanager/alertmanager.yml" in (service.get("command") or []))
        self.check("alertmanager: publishes 9093", publishes(service, "9093"))
        if config_dir is None:
            return
        path = os.environ.get("AMTOOL") or self.path(".local", "promtool", "bin", "amtool")
        if not os.access(path, os.X_OK):
            self.check("amtool available", False, f"{path} (deploy/local/install.sh promtool)")
            return
        config = os.path.join(os.path.normpath(os.path.join(self.root, config_dir)), "alertmanager.yml")
        result = subprocess.run([path, "check-config", config], capture_output=True, text=True)
        output = (result.stdout + result.stderr).strip().replace("\n", " | ")
        self.check("amtool check-config", result.returncode == 0, output[:800])
        self.inhibitions(yaml.safe_load(open(config)) or {})

    def inhibitions(self, config):
        """Each inhibit rule silences some alert of the rules with another (their labels as
        Prometheus attaches them: the rule's `labels`; `alertname` is the rule's name)."""
        def matches(labels, matchers):
            for matcher in matchers:
                found = re.fullmatch(r'\s*(\w+)\s*(=~|!=|=)\s*"(.*)"\s*', matcher)
                if not found:
                    return False
                name, op, value = found.groups()
                actual = labels.get(name, "")
                if (op == "=" and actual != value) or (op == "!=" and actual == value) or (op == "=~" and not re.fullmatch(value, actual)):
                    return False
            return True
        alerts = [dict(labels, alertname=str(name)) for name, labels in self.alert_labels]
        for index, rule in enumerate(config.get("inhibit_rules") or []):
            equal = rule.get("equal") or []
            pairs = [(source["alertname"], target["alertname"]) for source in alerts for target in alerts
                     if source is not target and matches(source, rule.get("source_matchers") or [])
                     and matches(target, rule.get("target_matchers") or [])
                     and all(source.get(label, "") == target.get(label, "") for label in equal)]
            self.check(f"alertmanager: inhibit rule {index + 1} silences one alert rule with another", bool(pairs),
                       f"no pair of alert rules matches {rule}")

    # --- promtool: Prometheus's own parser ------------------------------------------------------

    def promtool(self):
        path = os.environ.get("PROMTOOL") or self.path(".local", "promtool", "bin", "promtool")
        if not os.access(path, os.X_OK):
            self.check("promtool available", False, f"{path} (deploy/local/install.sh promtool)")
            return None
        return path

    def run_promtool(self, name, arguments):
        promtool = self.promtool()
        if promtool is None:
            return
        result = subprocess.run([promtool] + arguments, capture_output=True, text=True)
        output = (result.stdout + result.stderr).strip().replace("\n", " | ")
        self.check(name, result.returncode == 0, output[:800])

    def promtool_config(self, folder, config):
        # The configuration names its rule files by their path inside the container; check a copy
        # that names the repository's files instead (promtool checks the rules it references too).
        local = dict(config)
        local["rule_files"] = [os.path.join(folder, os.path.relpath(r, "/etc/prometheus")) for r in config.get("rule_files") or []]
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            yaml.safe_dump(local, f)
            copy = f.name
        try:
            self.run_promtool("promtool check config (and its rule files)", ["check", "config", copy])
        finally:
            os.unlink(copy)

    def promtool_queries(self, queries):
        # Every dashboard query as a recording rule: `promtool check rules` parses each with
        # Prometheus's PromQL parser.
        if not queries:
            return
        rules = {"groups": [{"name": "dashboards", "rules": [
            {"record": f"dashboard:query_{i}", "expr": expr} for i, (_, expr) in enumerate(queries)
        ]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            yaml.safe_dump(rules, f)
            path = f.name
        try:
            self.run_promtool(f"promtool parses the {len(queries)} dashboard queries", ["check", "rules", path])
        finally:
            os.unlink(path)

    def expression(self, where, expr, metrics):
        names = promql_metric_names(expr)
        self.check(f"{where}: queries a metric", len(names) > 0 or "vector(" in expr, expr)
        for metric in names:
            base = re.sub(r"_(bucket|sum|count)$", "", metric)
            self.check(f"{where}: metric {metric} is exported by the code", metric in metrics or base in metrics)

    def runbook_anchor(self, where, runbook):
        if not runbook:
            self.check(f"{where}: names its runbook section", False)
            return
        file, _, anchor = runbook.partition("#")
        path = self.path(file)
        self.check(f"{where}: runbook {file} exists", os.path.exists(path))
        if os.path.exists(path) and anchor:
            headings = [github_anchor(h) for h in re.findall(r"(?m)^#+\s+(.+?)\s*$", open(path).read())]
            self.check(f"{where}: runbook section #{anchor} exists", anchor in headings)


def given_variables(keys):
    """The variables a service environment gives, `KEY_FILE` counted as `KEY`."""
    return {k[:-5] if k.endswith("_FILE") else k for k in keys}


def promql_metric_names(expr):
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = []
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        token = match.group(0)
        following = text[match.end():].lstrip()
        preceding = text[:match.start()].rstrip()
        if following.startswith("(") or token.lower() in PROMQL_WORDS:
            continue
        if re.search(r"\d$", preceding) or preceding.endswith("offset"):
            continue
        names.append(token)
    return names


def github_anchor(heading):
    anchor = heading.strip().lower()
    anchor = re.sub(r"[^\w\- ]", "", anchor)
    return anchor.replace(" ", "-")


def find_compose_spec(root):
    """The Compose Specification schema kept beside this script."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "compose-spec.json")


def main(root):
    compose_path = os.environ.get("COMPOSE_FILE", os.path.join(root, "docker-compose.yml"))
    spec_path = os.environ.get("COMPOSE_SPEC") or find_compose_spec(root)
    checker = Checker(root, compose_path, spec_path)
    checker.run()
    failed = [r for r in checker.results if not r[1]]
    for name, ok, detail in checker.results:
        if not ok:
            print(f"FAIL {name}" + (f": {detail}" if detail else ""))
    print(f"compose check: {len(checker.results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.getcwd()))
