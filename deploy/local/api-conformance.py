"""Schemathesis against every service's OpenAPI document, on the running local services.

Prepares what the documents cannot say by themselves (an admin API key, an enrolled device and its
token, a real page cursor per paged list, an organization, site, gate and beacon that exist), writes
one schemathesis configuration per service into a scratch directory, runs `schemathesis run` with
every check (`--checks all`: server errors, status codes, content types, headers, response schemas,
negative-data rejection, positive-data acceptance, undeclared methods, ...) and all phases (examples,
coverage, fuzzing, stateful), and fails when any service has a finding.

    python api-conformance.py ROOT [SERVICE ...]

Environment: the ports of deploy/local/env.sh, RUN_DIR (secrets), API_CHECK_MAX_EXAMPLES (default 25),
API_CHECK_SEED (default 1: a run is repeatable), API_CHECK_PARALLEL (services checked at once,
default 2), API_CHECK_REPORT_DIR (default RUN_DIR/api-conformance).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SERVICES = {
    "beacon-registry": ("REGISTRY_PORT", "8083"),
    "ingest-gateway": ("GATEWAY_PORT", "8080"),
    "session-merger": ("MERGER_PORT", "8082"),
    "policy-service": ("POLICY_PORT", "8081"),
    "telemetry-aggregator": ("TELEMETRY_PORT", "8084"),
}


def base_url(service: str) -> str:
    variable, default = SERVICES[service]
    return f"http://127.0.0.1:{os.environ.get(variable, default)}"


def call(method: str, url: str, body: object | None = None, headers: dict[str, str] | None = None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, text.decode(errors="replace")


def must(expected: set[int], answer: tuple[int, object], what: str) -> object:
    status, body = answer
    if status not in expected:
        raise SystemExit(f"api-conformance: preparing {what} failed: {status} {body}")
    return body


class Fixture:
    """An organization with a site, a gate, a beacon, a user assigned to the site and an enrolled
    device, made through the registry's own API; two of each listed thing, so every list has a
    second page and a real cursor."""

    def __init__(self, admin_key: str) -> None:
        self.admin = {"Authorization": f"Bearer {admin_key}"}
        registry = base_url("beacon-registry")
        tag = uuid.uuid4().hex[:10]
        orgs = [must({201}, call("POST", f"{registry}/v1/admin/organizations", {"name": f"API check {tag} {i}"}, self.admin), "an organization") for i in range(2)]
        self.organization_id = orgs[0]["id"]
        site = {
            "organizationId": self.organization_id, "timezone": "Asia/Ho_Chi_Minh",
            "geofence": {"latitude": 10.77, "longitude": 106.70, "radiusMeters": 150},
            "shift": {"start": "08:30", "end": "17:30", "checkInBeforeStartMinutes": 60, "checkOutAfterEndMinutes": 120,
                      "lateEntryGraceMinutes": 5, "earlyExitGraceMinutes": 5},
        }
        sites = [must({201}, call("POST", f"{registry}/v1/admin/sites", {**site, "name": f"Site {i}"}, self.admin), "a site") for i in range(2)]
        self.site_id = sites[0]["id"]
        must({200}, call("POST", f"{registry}/v1/admin/organizations/{self.organization_id}/namespace", None, self.admin), "a namespace")
        gates = [must({201}, call("POST", f"{registry}/v1/admin/gates", {"siteId": self.site_id, "name": f"Gate {i}"}, self.admin), "a gate") for i in range(2)]
        self.gate_id = gates[0]["id"]
        beacons = []
        for gate in gates:
            minor = must({201}, call("POST", f"{registry}/v1/admin/gates/{gate['id']}/minor", None, self.admin), "a minor")
            beacons.append(must({201}, call("POST", f"{registry}/v1/admin/beacons", {
                "uuid": minor["uuid"], "major": minor["major"], "minor": minor["minor"], "gateId": gate["id"],
            }, self.admin), "a beacon"))
        self.beacon = beacons[0]
        user = must({201}, call("POST", f"{registry}/v1/admin/users", {"name": f"API check {tag}", "siteIds": [self.site_id]}, self.admin), "a user")
        self.user_id = user["id"]
        code = must({201}, call("POST", f"{registry}/v1/admin/users/{self.user_id}/enrollment-codes", {}, self.admin), "an enrollment code")
        enrolled = must({201}, call("POST", f"{registry}/v1/devices/enroll", {"code": code["code"], "appVersion": "1.0.0", "model": "iPhone15,2"}), "a device")
        self.device_id = enrolled["deviceId"]
        self.device_token = enrolled["token"]
        # The merger answers daily attendance from its registry feed (503 while that loads): wait
        # until it knows the new site, so that a 503 in the run is a finding.
        merger = base_url("session-merger")
        deadline = time.monotonic() + 90
        while call("GET", f"{merger}/v1/admin/attendance/daily?siteId={self.site_id}&from=2025-09-01&to=2025-09-01", None, self.admin)[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit("api-conformance: the merger's registry feed did not catch up within 90 s")
            time.sleep(0.5)
        self.cursors = {
            "organizations": must({200}, call("GET", f"{registry}/v1/admin/organizations?limit=1", None, self.admin), "a cursor")["nextCursor"],
            "sites": must({200}, call("GET", f"{registry}/v1/admin/organizations/{self.organization_id}/sites?limit=1", None, self.admin), "a cursor")["nextCursor"],
            "gates": must({200}, call("GET", f"{registry}/v1/admin/sites/{self.site_id}/gates?limit=1", None, self.admin), "a cursor")["nextCursor"],
            "beacons": must({200}, call("GET", f"{registry}/v1/admin/sites/{self.site_id}/beacons?limit=1", None, self.admin), "a cursor")["nextCursor"],
        }


def toml_string(value: str) -> str:
    return json.dumps(value)


def configuration(service: str, fixture: Fixture) -> str:
    """The schemathesis configuration of one service: its credentials and the real values of the
    parameters a document can only describe as opaque."""
    lines: list[str] = []
    if service == "ingest-gateway":
        lines.append(f"headers = {{ Authorization = {toml_string('Bearer ' + fixture.device_token)}, X-Device-Id = {toml_string(fixture.device_id)} }}")
    else:
        lines.append(f"headers = {{ Authorization = {toml_string(fixture.admin['Authorization'])} }}")
    if service == "beacon-registry":
        for name, path in (
            ("organizations", "/v1/admin/organizations"), ("sites", "/v1/admin/organizations/{id}/sites"),
            ("gates", "/v1/admin/sites/{id}/gates"), ("beacons", "/v1/admin/sites/{id}/beacons"),
        ):
            lines += ["", "[[operations]]", f"include-path = {toml_string(path)}", "include-method = \"GET\"",
                      f"parameters = {{ \"query.cursor\" = {toml_string(fixture.cursors[name])} }}"]
        # A sighting's `seenAt` lies within the last 7 days and at most 5 minutes ahead of the
        # server's clock, a rule relative to the request that the document says in words: most
        # schema-valid times are refused with a 400 naming `seenAt` (the registry's own tests record
        # accepted sightings).
        lines += ["", "[[operations]]", 'include-path = "/v1/admin/sightings"', 'include-method = "POST"',
                  "checks.positive_data_acceptance.enabled = false"]
        # A site's detection settings must also pass the app's cross-field rules (the leave level below
        # the enter level, a grace long enough for the readings it needs), which the document says in
        # words: schema-valid documents are often refused with a 400 naming the key (the registry's
        # own tests store accepted ones). The fixture's site is used, so accepted ones are stored.
        lines += ["", "[[operations]]", 'include-path = "/v1/admin/sites/{id}/detection-config"', 'include-method = "PUT"',
                  f'parameters = {{ "path.id" = {toml_string(fixture.site_id)} }}',
                  "checks.positive_data_acceptance.enabled = false"]
        # A site's new shift must also pass rules the document says in words (the two graces within the
        # shift's length, `from` not after the site's today): schema-valid bodies are often refused with a
        # 400 naming the field (the registry's own tests store accepted ones).
        lines += ["", "[[operations]]", 'include-path = "/v1/admin/sites/{id}/shift"', 'include-method = "PUT"',
                  "checks.positive_data_acceptance.enabled = false"]
        # A user's own routes: schemathesis's stateful phase infers a link from `POST /v1/admin/users`
        # to them that can fill `{id}` with another resource's id (seen: a site's id right after a user
        # was created, on a fresh database), and then takes the correct 404 for a created resource gone
        # missing. The routes with the created user's id are tested by the registry's own tests and the
        # CLI's end-to-end test; every other check still runs on them.
        for path, method in (
            ("/v1/admin/users/{id}", "GET"), ("/v1/admin/users/{id}/sites", "PUT"), ("/v1/admin/users/{id}/name", "PUT"),
            ("/v1/admin/users/{id}/devices", "GET"),
        ):
            lines += ["", "[[operations]]", f"include-path = {toml_string(path)}", f"include-method = {toml_string(method)}",
                      "checks.ensure_resource_availability.enabled = false"]
        # The device's own operation takes its token, not an API key.
        lines += ["", "[[operations]]", 'include-path = "/v1/devices/config"',
                  f"headers = {{ Authorization = {toml_string('Bearer ' + fixture.device_token)} }}",
                  f'parameters = {{ "header.X-Device-Id" = {toml_string(fixture.device_id)} }}']
    if service == "ingest-gateway":
        # An event's times must lie within the last 7 days and at most 5 minutes ahead of the
        # server's clock, and an event names the authenticated device and user and repeats its
        # Idempotency-Key: rules relative to the request that no schema states (the document says
        # them in words). Schema-valid bodies are therefore mostly refused with a 400 naming the
        # field, so the positive-acceptance check is off for these operations; every other check
        # runs (the gateway's own tests send accepted events of every kind).
        for path in ("/v1/attendance/events", "/v1/attendance/check-in", "/v1/attendance/check-out",
                     "/v1/attendance/heartbeat", "/v1/telemetry"):
            lines += ["", "[[operations]]", f"include-path = {toml_string(path)}", 'include-method = "POST"',
                      "checks.positive_data_acceptance.enabled = false"]
            if path == "/v1/telemetry":
                # A thousand telemetry events are over the 64 KiB body limit: that refusal is a 413.
                lines.append("checks.negative_data_rejection.expected-statuses = "
                             "[400, 401, 403, 404, 405, 406, 409, 413, 415, 422, 428, 429]")
    if service == "session-merger":
        # Rules a schema cannot state are held by fixed values: a session query names a user or a
        # site, `from` is before `to`, a daily range is at most 92 days, and a cursor is one the API
        # made. A session cursor is a position (check-in time and session id), so one built the way
        # the merger builds it is a real one.
        cursor = base64.urlsafe_b64encode(f"s1:{int(time.time() * 1000)}:ses_api_check".encode()).decode().rstrip("=")
        lines += ["", "[[operations]]", 'include-path = "/v1/admin/sessions"',
                  f'parameters = {{ "query.siteId" = {toml_string(fixture.site_id)}, "query.from" = "2020-01-01T00:00:00Z", '
                  f'"query.to" = "2100-01-01T00:00:00Z", "query.cursor" = {toml_string(cursor)} }}']
        # An event cursor is a position too (event time in microseconds and idempotency key).
        event_cursor = base64.urlsafe_b64encode(f"e1:{int(time.time() * 1_000_000)}:api-check".encode()).decode().rstrip("=")
        lines += ["", "[[operations]]", 'include-path = "/v1/admin/events"',
                  f'parameters = {{ "query.userId" = {toml_string(fixture.user_id)}, "query.from" = "2020-01-01T00:00:00Z", '
                  f'"query.to" = "2100-01-01T00:00:00Z", "query.cursor" = {toml_string(event_cursor)} }}']
        lines += ["", "[[operations]]", 'include-path = "/v1/admin/attendance/daily"',
                  'parameters = { "query.from" = "2025-09-01", "query.to" = "2025-09-30" }']
    return "\n".join(lines) + "\n"


def run(root: Path, service: str, fixture: Fixture, scratch: Path) -> bool:
    document = root / "Services" / service / "Service" / "Resources" / "openapi.yaml"
    config = scratch / f"{service}.toml"
    config.write_text(configuration(service, fixture))
    report = scratch / f"{service}.junit.xml"
    command = [
        str(Path(sys.executable).parent / "schemathesis"), "--config-file", str(config), "run", str(document),
        # Every check is on (schemathesis's default; `--checks all` would also override the
        # per-operation settings of the configuration).
        "--url", base_url(service),
        "--max-examples", os.environ.get("API_CHECK_MAX_EXAMPLES", "25"),
        "--seed", os.environ.get("API_CHECK_SEED", "1"),
        # No response-time check: the timeout catches a hang, and speed is the benchmarks' to measure
        # (in `make test` these runs share two cores with the whole suite; docs/DECISIONS.md).
        "--workers", "1", "--request-timeout", "5",
        "--generation-database", "none",
        "--report", "junit", "--report-junit-path", str(report),
    ]
    started = time.monotonic()
    completed = subprocess.run(command, cwd=scratch, capture_output=True, text=True)
    output = completed.stdout + completed.stderr
    (scratch / f"{service}.log").write_text(output)
    summary = output[output.rfind("=== SUMMARY ==="):] if "=== SUMMARY ===" in output else output[-4000:]
    failures = ""
    if completed.returncode != 0 and "=== FAILURES ===" in output:
        failures = output[output.find("=== FAILURES ==="):output.find("=== WARNINGS ===")][:20000] + "\n"
    # One block per service, printed whole: the services' runs overlap (see main).
    sys.stdout.write(f"==> schemathesis {service} ({base_url(service)})\n{failures}{summary.strip()}\n"
                     f"    {service}: {'no findings' if completed.returncode == 0 else 'FINDINGS'} in {time.monotonic() - started:.0f} s "
                     f"(log: {scratch / (service + '.log')})\n")
    sys.stdout.flush()
    return completed.returncode == 0


def check(root: Path, service: str, fixture: Fixture, scratch: Path) -> bool:
    """One service's run; the policy service's leaves the kill switch and the default policy as it found them."""
    if service != "policy-service":
        return run(root, service, fixture, scratch)
    policies = base_url("policy-service") + "/v1/admin/policies"
    switched = must({200}, call("GET", policies, None, fixture.admin), "the policy book")["globalKillSwitch"]
    default_versions = must({200}, call("GET", policies + "/default/versions", None, fixture.admin), "the default policy")
    try:
        ok = run(root, service, fixture, scratch)
    finally:
        must({200}, call("PUT", base_url("policy-service") + "/v1/admin/kill-switch", {"enabled": switched}, fixture.admin), "the kill switch")
    if must({200}, call("GET", policies + "/default/versions", None, fixture.admin), "the default policy") != default_versions:
        print("api-conformance: the run wrote a new version of the default policy (restore one with "
              "POST /v1/admin/policies/default/versions/{version}/restore)", file=sys.stderr)
        return False
    return ok


def main() -> int:
    # Stopped from outside (make test ending early stops its whole chain): exit through the `finally`
    # blocks, so the policy service's kill switch is put back as it was found, never left on for the
    # stack's next run.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    root = Path(sys.argv[1]).resolve()
    services = sys.argv[2:] or list(SERVICES)
    unknown = [s for s in services if s not in SERVICES]
    if unknown:
        print(f"api-conformance: unknown service {unknown[0]!r} (one of: {', '.join(SERVICES)})", file=sys.stderr)
        return 2
    # Services are checked side by side (API_CHECK_PARALLEL at a time, default 2): a run mostly waits
    # on its service's answers, and each service has its own data, so two runs do not meet.
    try:
        parallel = max(1, int(os.environ.get("API_CHECK_PARALLEL") or "2"))
    except ValueError:
        print(f"api-conformance: API_CHECK_PARALLEL must be a whole number, not {os.environ['API_CHECK_PARALLEL']!r}", file=sys.stderr)
        return 2
    run_dir = Path(os.environ.get("RUN_DIR", root / ".local" / "run"))
    admin_key = (run_dir / "secrets" / "admin-api-key").read_text().strip()
    scratch = Path(os.environ.get("API_CHECK_REPORT_DIR", run_dir / "api-conformance"))
    scratch.mkdir(parents=True, exist_ok=True)
    fixture = Fixture(admin_key)
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        def guarded(service: str) -> bool:
            # A run that could not even start is that service's failure; the others still report.
            try:
                return check(root, service, fixture, scratch)
            except Exception as error:  # noqa: BLE001 - reported, and the run fails
                sys.stdout.write(f"==> schemathesis {service}: could not run: {error}\n")
                sys.stdout.flush()
                return False

        futures = {service: pool.submit(guarded, service) for service in services}
        results = {service: future.result() for service, future in futures.items()}
    print("==> API conformance: " + ", ".join(f"{s} {'ok' if ok else 'FAILED'}" for s, ok in results.items()))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
