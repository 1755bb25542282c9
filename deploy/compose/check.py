"""Checks docker-compose.yml without a container engine.

1. It validates against the Compose Specification JSON schema (../shared/compose-spec.json beside
   the repository, or $COMPOSE_SPEC).
2. It matches the code: every image is pinned (no `latest`, no untagged image); every service
   built from the repository runs a command that is an executable product of Package.swift; every
   environment variable given to a project service is read somewhere in Shared/ or Services/
   (or by deploy/local/env.sh for the local stack); every build target exists in its Dockerfile;
   depends_on names real services; the local stack's variables (KAFKA_BROKERS, PG*) are the ones
   the containers get.

Prints one line per finding and `compose check: N passed, M failed`.
"""
import json
import os
import re
import sys

import jsonschema
import yaml


def main(root: str) -> int:
    compose_path = os.environ.get("COMPOSE_FILE", os.path.join(root, "docker-compose.yml"))
    spec_path = os.environ.get("COMPOSE_SPEC", os.path.join(root, "..", "shared", "compose-spec.json"))
    try:
        with open(compose_path) as f:
            compose = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as error:
        print(f"FAIL read {compose_path}: {error}")
        print("compose check: 0 passed, 1 failed")
        return 1
    if not isinstance(compose, dict):
        print(f"FAIL {compose_path}: not a YAML mapping")
        print("compose check: 0 passed, 1 failed")
        return 1

    results = []

    def check(name, ok, detail=""):
        results.append((name, ok, detail))

    # 1. The Compose Specification.
    if os.path.exists(spec_path):
        with open(spec_path) as f:
            schema = json.load(f)
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
        check("compose schema", not errors, "; ".join(f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]))
    else:
        check("compose schema", False, f"schema not found at {spec_path} (set COMPOSE_SPEC)")

    package = open(os.path.join(root, "Package.swift")).read()
    executables = set(re.findall(r'\.executableTarget\(\s*name:\s*"([^"]+)"', package))
    code = read_sources(root, ["Shared", "Services"])
    local_env = open(os.path.join(root, "deploy", "local", "env.sh")).read()

    services = compose.get("services", {})
    project_images = {s.get("image") for s in services.values() if "build" in s}
    for name, service in services.items():
        image = service.get("image")
        if image:
            tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else None
            check(f"{name}: image pinned", tag not in (None, "latest"), image)
        project = "build" in service or image in project_images
        if "build" in service:
            build = service["build"]
            dockerfile = os.path.join(root, build.get("context", "."), build.get("dockerfile", "Dockerfile"))
            exists = os.path.exists(dockerfile)
            check(f"{name}: Dockerfile exists", exists, dockerfile)
            if exists and "target" in build:
                stages = re.findall(r"(?im)^FROM\s+\S+\s+AS\s+(\S+)", open(dockerfile).read())
                check(f"{name}: build target '{build['target']}' exists", build["target"] in stages, f"stages: {stages}")
                products = re.findall(r"--product\s+(\S+)", open(dockerfile).read())
                for product in products:
                    check(f"{name}: Dockerfile builds product '{product}'", product in executables, f"executables: {sorted(executables)}")
        if project:
            command = service.get("command")
            if isinstance(command, list) and command:
                check(f"{name}: command '{command[0]}' is a product", command[0] in executables, f"executables: {sorted(executables)}")
            for key in env_keys(service.get("environment")):
                used = f'"{key}"' in code or re.search(rf"\b{re.escape(key)}\b", local_env) is not None
                check(f"{name}: env {key} is read by the code", used)
        for dependency in (service.get("depends_on") or {}):
            check(f"{name}: depends_on {dependency} exists", dependency in services)

    # The containers get the same variables as the local stack.
    for key in ["KAFKA_BROKERS", "PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE"]:
        check(f"local stack exports {key}", re.search(rf"export {key}=", local_env) is not None)

    failed = [r for r in results if not r[1]]
    for name, ok, detail in results:
        if not ok:
            print(f"FAIL {name}" + (f": {detail}" if detail else ""))
    print(f"compose check: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


def env_keys(environment):
    if environment is None:
        return []
    if isinstance(environment, dict):
        return [k for k in environment.keys() if k != "<<"]
    return [entry.split("=", 1)[0] for entry in environment]


def read_sources(root, folders):
    chunks = []
    for folder in folders:
        for dirpath, _, files in os.walk(os.path.join(root, folder)):
            for file in files:
                if file.endswith(".swift"):
                    with open(os.path.join(dirpath, file)) as f:
                        chunks.append(f.read())
    return "\n".join(chunks)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.getcwd()))
