#!/usr/bin/env python3
"""check-deploy.py PUSHFLEET_BINARY [--image STATIC_BINARY]: checks deploy/ without a container engine.

- every Kubernetes manifest validates against the Kubernetes schemas (kubernetes-validate);
- the KEDA objects have the fields KEDA reads, and scale the worker Deployment on a backlog list;
- the worker's grace period is longer than its drain; probes point at /healthz and /readyz;
- deploy/compose.yaml parses and names the services an operator needs;
- every PUSHFLEET_* variable, and every argument, given to a pushfleet container (Kubernetes and
  compose) names an option of the command it runs: a typo would otherwise be ignored;
- with --image, the image's runtime stage as far as this machine allows: a binary built as the
  Dockerfile builds it (scripts/build-static.sh) needs no Swift library, every library it does need
  comes from a package the runtime stage installs or debian:bookworm-slim has, and it runs.

Prints one line per problem, each naming the file; exits 1 if there is any.
"""
import json
import os
import subprocess
import sys

import yaml
import kubernetes_validate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# PUSHFLEET_DEPLOY_DIR checks a copy (the tests break one on purpose).
DEPLOY = os.environ.get("PUSHFLEET_DEPLOY_DIR") or os.path.join(ROOT, "deploy")
KUBERNETES_VERSION = "1.30.0"
WORKER_SHUTDOWN_SECONDS = 50  # the worker's ServiceGroup cancels a drain still running after this

problems = []


def problem(path, message):
    problems.append(f"{os.path.relpath(path, os.path.dirname(DEPLOY))}: {message}")


def options_by_command(binary):
    """{"worker": {"topic": "option", "json": "flag", ...}, ...} from the CLI's own description."""
    dump = json.loads(subprocess.run([binary, "--experimental-dump-help"], check=True, capture_output=True, text=True).stdout)
    commands = {}

    def walk(command, path):
        names = {}
        for argument in command.get("arguments", []):
            for name in argument.get("names", []):
                if name["kind"] == "long":
                    names[name["name"]] = argument["kind"]
        commands[" ".join(path)] = names
        for sub in command.get("subcommands", []):
            walk(sub, path + [sub["commandName"]])

    walk(dump["command"], [])
    return commands


def check_invocation(path, where, args, environment, commands):
    """`args` (the pushfleet arguments) and `environment` (name → value) against the CLI."""
    words = []
    for arg in args:
        if arg.startswith("-"):
            break
        words.append(arg)
    command = " ".join(words)
    if command not in commands:
        problem(path, f"{where}: pushfleet has no command '{command}'")
        return
    known = commands[command]
    for arg in args[len(words):]:
        if arg.startswith("--") and arg[2:].split("=")[0] not in known:
            problem(path, f"{where}: `pushfleet {command}` has no option {arg}")
    for name in environment:
        if not name.startswith("PUSHFLEET_"):
            continue
        option = name[len("PUSHFLEET_"):]
        if option.endswith("_FILE"):
            option = option[: -len("_FILE")]
        option = option.lower().replace("_", "-")
        if option not in known:
            problem(path, f"{where}: {name} names no option of `pushfleet {command}`")


def kubernetes(commands):
    documents = {}
    for name in sorted(os.listdir(os.path.join(DEPLOY, "kubernetes"))):
        if not name.endswith(".yaml"):
            continue
        path = os.path.join(DEPLOY, "kubernetes", name)
        with open(path) as file:
            for document in yaml.safe_load_all(file):
                if document:
                    documents.setdefault(document["kind"], []).append((path, document))

    for kind, entries in documents.items():
        for path, document in entries:
            if document["apiVersion"].startswith("keda.sh/") or kind == "Kustomization":
                continue
            try:
                kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                problem(path, f"{kind} {document['metadata'].get('name')}: {error.message} at {'.'.join(map(str, error.path))}")
            except Exception as error:  # noqa: BLE001 - any failure to validate is a problem to report
                problem(path, f"{kind} {document['metadata'].get('name')}: cannot validate: {error}")

    config_maps = {d["metadata"]["name"]: d.get("data", {}) for _, d in documents.get("ConfigMap", [])}
    deployments = {d["metadata"]["name"]: (p, d) for p, d in documents.get("Deployment", [])}
    for name, (path, deployment) in deployments.items():
        spec = deployment["spec"]["template"]["spec"]
        for container in spec["containers"]:
            environment = {e["name"]: e.get("value") for e in container.get("env", [])}
            for source in container.get("envFrom", []):
                reference = source.get("configMapRef", {}).get("name")
                if reference is not None:
                    if reference not in config_maps:
                        problem(path, f"{name}: envFrom names no ConfigMap {reference}")
                    environment.update(config_maps.get(reference, {}))
            check_invocation(path, f"Deployment {name}", container.get("args", []), environment, commands)
            for probe, expected in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
                if container.get(probe, {}).get("httpGet", {}).get("path") != expected:
                    problem(path, f"{name}: {probe} should GET {expected}")
            security = spec.get("securityContext", {})
            secret_volumes = [v for v in spec.get("volumes", []) if "secret" in v]
            if security.get("runAsUser", 0) != 0 and secret_volumes and "fsGroup" not in security:
                problem(path, f"{name}: runs as user {security['runAsUser']} with secret volumes but no fsGroup: it cannot read them")
            if "worker" in container.get("args", [])[:1]:
                grace = spec.get("terminationGracePeriodSeconds", 30)
                if grace <= WORKER_SHUTDOWN_SECONDS:
                    problem(path, f"{name}: terminationGracePeriodSeconds {grace} is not above the worker's {WORKER_SHUTDOWN_SECONDS} s shutdown")

    scaled = documents.get("ScaledObject", [])
    if not scaled:
        problem(os.path.join(DEPLOY, "kubernetes"), "no KEDA ScaledObject")
    authentications = {d["metadata"]["name"] for _, d in documents.get("TriggerAuthentication", [])}
    for path, document in scaled:
        spec = document.get("spec", {})
        if document.get("apiVersion") != "keda.sh/v1alpha1":
            problem(path, f"ScaledObject apiVersion is {document.get('apiVersion')}, KEDA reads keda.sh/v1alpha1")
        target = spec.get("scaleTargetRef", {}).get("name")
        if target not in deployments or "worker" not in deployments[target][1]["spec"]["template"]["spec"]["containers"][0].get("args", [])[:1]:
            problem(path, f"ScaledObject scales {target}, not the worker Deployment")
        if spec.get("minReplicaCount") != 0:
            problem(path, "ScaledObject should scale workers to 0 when idle (minReplicaCount: 0)")
        if not isinstance(spec.get("maxReplicaCount"), int) or spec["maxReplicaCount"] < 1:
            problem(path, "ScaledObject needs a positive maxReplicaCount")
        triggers = spec.get("triggers", [])
        if len(triggers) != 1 or triggers[0].get("type") != "redis":
            problem(path, "ScaledObject should have one trigger of type redis")
            continue
        metadata = triggers[0].get("metadata", {})
        for field in ("address", "listName", "listLength"):
            if not isinstance(metadata.get(field), str) or not metadata[field]:
                problem(path, f"redis trigger needs metadata.{field} as a string")
        if not metadata.get("listName", "").startswith("pf:backlog:"):
            problem(path, "redis trigger should read a pf:backlog:<topic>:<environment> list")
        if not metadata.get("listLength", "").isdigit():
            problem(path, "redis trigger's listLength should be a whole number, in quotes")
        reference = triggers[0].get("authenticationRef", {}).get("name")
        if reference is not None and reference not in authentications:
            problem(path, f"redis trigger names no TriggerAuthentication {reference}")


def compose(commands):
    path = os.path.join(DEPLOY, "compose.yaml")
    with open(path) as file:
        document = yaml.safe_load(file)
    services = document.get("services", {})
    for needed in ("redis", "postgres", "coordinator", "worker", "mock-apns", "prometheus", "grafana"):
        if needed not in services:
            problem(path, f"no service {needed}")
    redis = " ".join(services.get("redis", {}).get("command", []))
    if "--appendonly yes" not in redis or "--maxmemory-policy noeviction" not in redis:
        problem(path, "Redis should run with --appendonly yes and --maxmemory-policy noeviction")
    for name, service in services.items():
        if service.get("image") != "pushfleet:latest" or not isinstance(service.get("command"), list):
            continue
        if service.get("entrypoint"):
            continue  # a shell around pushfleet (the launch tool)
        environment = service.get("environment", {})
        check_invocation(path, f"service {name}", service["command"], environment, commands)
    for relative in ("prometheus/prometheus.yml", "prometheus/alerts.yml", "grafana/provisioning/datasources/prometheus.yaml",
                     "grafana/provisioning/dashboards/pushfleet.yaml"):
        with open(os.path.join(DEPLOY, relative)) as file:
            yaml.safe_load(file)
    dashboard_path = os.path.join(DEPLOY, "grafana", "pushfleet.json")
    with open(dashboard_path) as file:
        dashboard = json.load(file)
    if not dashboard.get("panels"):
        problem(dashboard_path, "no panels")


# Packages debian:bookworm-slim has: libc6 and what apt and dpkg depend on.
BOOKWORM_SLIM = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
SWIFT_RUNTIME_PREFIXES = ("libswift", "libFoundation", "lib_FoundationICU", "libdispatch", "libBlocksRuntime")


def runtime_packages(path):
    """The packages the last stage of the Dockerfile installs with apt-get."""
    with open(path) as file:
        text = file.read().replace("\\\n", " ")
    stage = text.split("\nFROM ")[-1]
    packages = set()
    for line in stage.splitlines():
        if "apt-get install" in line:
            words = line.split("apt-get install", 1)[1].split("&&")[0].split()
            packages.update(word for word in words if not word.startswith("-"))
    return packages


def image(binary):
    path = os.path.join(DEPLOY, "Dockerfile")
    installed = runtime_packages(path)
    if "libhiredis0.14" not in installed:
        problem(path, "the runtime stage does not install libhiredis0.14")
    with open(path) as file:
        if "scripts/build-static.sh" not in file.read():
            problem(path, "the build stage does not build with scripts/build-static.sh (the Swift runtime linked statically)")
    dynamic = subprocess.run(["readelf", "-d", binary], check=True, capture_output=True, text=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    resolved = {}
    for line in subprocess.run(["ldd", binary], capture_output=True, text=True).stdout.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            resolved[parts[0].strip()] = os.path.realpath(parts[1].split("(")[0].strip())
    for library in needed:
        if library.startswith(SWIFT_RUNTIME_PREFIXES):
            problem(path, f"{binary} needs {library}, which the runtime stage does not have (link the Swift runtime statically)")
            continue
        if library.startswith("ld-linux"):
            continue  # the loader, from libc6
        file = resolved.get(library)
        if file is None:
            problem(path, f"{binary} needs {library}, which this machine cannot find")
            continue
        owner = None
        for candidate in (file, file.replace("/usr/lib/", "/lib/", 1)):
            found = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if found.returncode == 0:
                owner = found.stdout.split(":")[0]
                break
        if owner is None:
            problem(path, f"{binary} needs {library} ({file}), which no Debian package provides")
        elif owner not in installed and owner not in BOOKWORM_SLIM:
            problem(path, f"{binary} needs {library} from {owner}, which the runtime stage does not install")
    ran = subprocess.run([binary, "--version"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    if ran.returncode != 0:
        problem(path, f"{binary} --version failed: {ran.stderr.strip()}")


def main():
    arguments = sys.argv[1:]
    static = None
    if len(arguments) == 3 and arguments[1] == "--image":
        static = arguments[2]
        arguments = arguments[:1]
    if len(arguments) != 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    commands = options_by_command(arguments[0])
    kubernetes(commands)
    compose(commands)
    if static is not None:
        image(static)
    for line in problems:
        print(line)
    if not problems:
        print("deploy/: every manifest valid")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
