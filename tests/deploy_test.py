#!/usr/bin/env python3
"""Checks deploy/: the Kubernetes manifests, the Grafana dashboard and the Dockerfile.

Parses every manifest and the dashboard and checks the invariants that matter for a
rollout: the grace period outlasts preStop plus --drain-timeout, every probe is a gRPC
health probe on the serving port, Services and the PodDisruptionBudget select the pods,
the autoscaler's metric is served by the prometheus-adapter rule and that rule reads a
metric the daemon exports, and the dashboard only queries metrics (and labels) the daemon
exports. The exported names come from a real `pagoda serve` (its /metrics after one
request), not from a list kept by hand.

usage: deploy_test.py --source SRC_DIR --bin BIN_DIR --model MODEL.gguf
Exit status 0 when every check passes, 1 otherwise (each failure printed), 77 when
PyYAML is missing (ctest reports the test as skipped).
"""

import argparse
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import yaml
except ImportError:
    print("SKIP: PyYAML is not installed (apt-get install python3-yaml)")
    sys.exit(77)

GRPC_PORT = 50051
METRICS_PORT = 9090
# Labels Prometheus itself attaches to every scraped series.
TARGET_LABELS = {"instance", "job", "namespace", "pod", "container", "service", "endpoint"}

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)
    return ok


def parse_duration(text):
    """Seconds in a daemon duration flag value such as 30s, 2m, 1h30m or 500ms."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def flag_value(args, flag):
    """The value of `flag` in an argument list (`--flag v` or `--flag=v`), or None."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


# ---- The daemon's exposition.

def exported_metrics(bin_dir, model):
    """{family: set of label names seen} from a live daemon, after one request."""
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "daemon.log")
        with open(log_path, "w") as log:
            daemon = subprocess.Popen(
                [os.path.join(bin_dir, "pagoda"), "serve", "--model", model, "--host",
                 "127.0.0.1", "--port", "0", "--metrics-port", "0"],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            ports = None
            deadline = time.time() + 60
            while ports is None and time.time() < deadline and daemon.poll() is None:
                m = re.search(r"serving on [0-9.]+:(\d+) \(metrics on port (\d+)\)",
                              open(log_path).read())
                ports = (int(m.group(1)), int(m.group(2))) if m else None
                time.sleep(0.05)
            if ports is None:
                raise RuntimeError("daemon did not start:\n" + open(log_path).read())
            subprocess.run(
                [os.path.join(bin_dir, "pagoda"), "generate", "--server",
                 f"127.0.0.1:{ports[0]}", "--prompt", "Once upon a time", "--max-tokens", "4"],
                check=True, capture_output=True, timeout=60)
            with urllib.request.urlopen(f"http://127.0.0.1:{ports[1]}/metrics",
                                        timeout=10) as r:
                text = r.read().decode()
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
    return parse_exposition(text)


def parse_exposition(text):
    """({family: set of label names, or None when it had no sample}, {sample name: family})."""
    families = {}
    sample_names = {}
    for line in text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)$", line)
        if m:
            name, kind = m.groups()
            families[name] = None
            suffixes = ["_bucket", "_sum", "_count"] if kind == "histogram" else [""]
            for s in suffixes:
                sample_names[name + s] = name
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$", line)
        if m and m.group(1) in sample_names:
            labels = re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or "")
            family = sample_names[m.group(1)]
            families[family] = (families[family] or set()) | {l for l in labels if l != "le"}
    return families, sample_names


# ---- Manifests.

def load_manifests(k8s_dir):
    docs = []
    for path in sorted(glob.glob(os.path.join(k8s_dir, "*.yaml"))):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                name = f"{os.path.basename(path)}: {doc.get('kind')}"
                if check(all(k in doc for k in ("apiVersion", "kind")),
                         f"{name}: apiVersion and kind are required"):
                    docs.append((path, doc))
    return docs


def by_kind(docs, kind):
    return [d for _, d in docs if d["kind"] == kind]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def check_deployment(dep):
    name = dep["metadata"]["name"]
    pod = dep["spec"]["template"]
    check(selects(dep["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"]),
          f"Deployment {name}: selector does not match the pod labels")
    spec = pod["spec"]
    containers = [c for c in spec["containers"] if c["name"] == "pagoda"]
    if not check(len(containers) == 1, f"Deployment {name}: no container named pagoda"):
        return
    c = containers[0]
    args = c.get("args", [])
    # The image's entrypoint sets --port and --metrics-port; args must not move them.
    check(flag_value(args, "--port") in (None, str(GRPC_PORT)),
          f"Deployment {name}: --port differs from {GRPC_PORT}")
    check(flag_value(args, "--metrics-port") in (None, str(METRICS_PORT)),
          f"Deployment {name}: --metrics-port differs from {METRICS_PORT}")
    drain = flag_value(args, "--drain-timeout")
    if not check(drain is not None, f"Deployment {name}: args set no --drain-timeout"):
        return
    drain_s = parse_duration(drain)
    pre_stop = c.get("lifecycle", {}).get("preStop", {})
    sleep_s = 0
    if "exec" in pre_stop:
        cmd = pre_stop["exec"]["command"]
        check(cmd[0] == "sleep" and len(cmd) == 2, f"Deployment {name}: preStop is not sleep N")
        sleep_s = float(cmd[1])
    elif "sleep" in pre_stop:
        sleep_s = float(pre_stop["sleep"]["seconds"])
    check(sleep_s > 0, f"Deployment {name}: no preStop delay for endpoint removal")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    check(grace > sleep_s + drain_s,
          f"Deployment {name}: terminationGracePeriodSeconds {grace} <= preStop {sleep_s}s + "
          f"--drain-timeout {drain_s}s")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    check(ports.get("grpc") == GRPC_PORT, f"Deployment {name}: port grpc is not {GRPC_PORT}")
    check(ports.get("metrics") == METRICS_PORT,
          f"Deployment {name}: port metrics is not {METRICS_PORT}")
    annotations = pod["metadata"].get("annotations", {})
    if "prometheus.io/port" in annotations:
        check(annotations["prometheus.io/port"] == str(METRICS_PORT),
              f"Deployment {name}: prometheus.io/port is not the metrics port")
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        p = c.get(probe)
        if not check(p is not None, f"Deployment {name}: no {probe}"):
            continue
        check(p.get("grpc", {}).get("port") == GRPC_PORT,
              f"Deployment {name}: {probe} is not a grpc probe on port {GRPC_PORT}")
    live = c.get("livenessProbe", {})
    live_s = live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
    check(live_s > drain_s, f"Deployment {name}: liveness gives up after {live_s}s, within "
          f"--drain-timeout {drain_s}s (a draining replica reads NOT_SERVING)")
    mounts = {m["name"] for m in c.get("volumeMounts", [])}
    volumes = {v["name"] for v in spec.get("volumes", [])}
    model = flag_value(args, "--model") or ""
    check(any(model.startswith(m["mountPath"] + "/") for m in c.get("volumeMounts", [])),
          f"Deployment {name}: --model {model} is not on a mounted volume")
    check(mounts <= volumes, f"Deployment {name}: volumeMounts name undeclared volumes")
    check("requests" in c.get("resources", {}), f"Deployment {name}: no resource requests")


def check_selectors(docs, dep):
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    ports = {p.get("name"): p["containerPort"]
             for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    for svc in by_kind(docs, "Service"):
        n = svc["metadata"]["name"]
        check(selects(svc["spec"].get("selector"), labels), f"Service {n}: selects no pod")
        for p in svc["spec"]["ports"]:
            t = p.get("targetPort", p["port"])
            check(t in ports or t in ports.values(),
                  f"Service {n}: targetPort {t} is not a container port")
    for pdb in by_kind(docs, "PodDisruptionBudget"):
        check(selects(pdb["spec"]["selector"]["matchLabels"], labels),
              f"PodDisruptionBudget {pdb['metadata']['name']}: selects no pod")


def adapter_rules(docs):
    """{custom metric name: source Prometheus series name} from prometheus-adapter rules."""
    out = {}
    for cm in by_kind(docs, "ConfigMap"):
        for key, text in cm.get("data", {}).items():
            if not key.endswith((".yaml", ".yml")):
                continue
            for rule in (yaml.safe_load(text) or {}).get("rules", []):
                series = re.match(r"\s*([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"]).group(1)
                naming = rule.get("name", {})
                matches = naming.get("matches", "^" + re.escape(series) + "$")
                exposed = re.sub(matches, naming.get("as", "") or series, series)
                check(re.search(matches, series),
                      f"adapter rule for {series}: name.matches does not match it")
                out[exposed] = series
    return out


def check_hpa(docs, dep, sample_names):
    rules = adapter_rules(docs)
    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    check(len(hpas) >= 1, "no HorizontalPodAutoscaler")
    for hpa in hpas:
        n = hpa["metadata"]["name"]
        ref = hpa["spec"]["scaleTargetRef"]
        check(ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"],
              f"HPA {n}: does not scale the Deployment")
        for m in hpa["spec"]["metrics"]:
            kind = m["type"]
            if not check(kind in ("Pods", "External", "Object"),
                         f"HPA {n}: metric type {kind} is not a custom/external metric"):
                continue
            metric = m[kind.lower()]["metric"]["name"]
            series = rules.get(metric)
            if check(series is not None, f"HPA {n}: no prometheus-adapter rule serves {metric}"):
                check(series in sample_names,
                      f"HPA {n}: {metric} comes from {series}, which the daemon does not export")


# ---- Dashboard.

def check_dashboard(path, families, sample_names):
    with open(path) as f:
        dash = json.load(f)
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    ds = [v for v in variables.values() if v["type"] == "datasource"]
    check(len(ds) == 1 and ds[0]["query"] == "prometheus",
          "dashboard: needs one Prometheus datasource variable")
    ds_ref = "${" + ds[0]["name"] + "}" if ds else None
    queries = []
    for v in variables.values():
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            queries.append((f"variable {v['name']}", q))
    panels = list(dash["panels"])
    for p in list(panels):
        panels.extend(p.get("panels", []))
    titles = set()
    for p in panels:
        if p["type"] == "row":
            continue
        titles.add(p["title"])
        check(p.get("datasource", {}).get("uid") == ds_ref,
              f"dashboard panel {p['title']!r}: not on the datasource variable")
        check(len(p.get("targets", [])) > 0, f"dashboard panel {p['title']!r}: no query")
        for t in p.get("targets", []):
            queries.append((f"panel {p['title']!r}", t["expr"]))
    for where, expr in queries:
        names = re.findall(r"\b(pagoda:[a-zA-Z0-9_:]+)", expr)
        check(names, f"dashboard {where}: queries no pagoda metric: {expr}")
        for name in names:
            if not check(name in sample_names,
                         f"dashboard {where}: {name} is not exported by the daemon"):
                continue
            labels = families[sample_names[name]]
            if labels is None:
                continue  # no sample yet (e.g. per-tenant engine gauges): labels unknown
            # Label matchers written right after the metric name.
            m = re.search(re.escape(name) + r"\{([^}]*)\}", expr)
            matchers = m.group(1) if m else ""
            unknown = set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*[=!]~?", matchers))
            unknown -= labels | TARGET_LABELS
            check(not unknown, f"dashboard {where}: {name} has no label(s) {sorted(unknown)}")
    # The panels an operator looks at.
    for needed in ("tokens/s", "Time to first token", "Time per output token", "Waiting",
                   "Running", "KV-cache", "Preemptions", "Failures"):
        check(any(needed.lower() in t.lower() for t in titles), f"dashboard: no {needed!r} panel")


# ---- Dockerfile.

def check_dockerfile(path):
    stages = []  # (name, instructions)
    text = open(path).read().replace("\\\n", " ")
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE)
        if m:
            stages.append((m.group(2), []))
        elif stages:
            stages[-1][1].append(line)
    names = [s[0] for s in stages]
    check("cuda" in names, "Dockerfile: no `cuda` target")
    check(stages and stages[-1][0] != "cuda",
          "Dockerfile: the default (last) stage must be the CPU image")
    for name, lines in stages:
        entry = [l for l in lines if l.upper().startswith("ENTRYPOINT")]
        if not entry:
            continue
        argv = json.loads(entry[-1][len("ENTRYPOINT"):].strip())
        check(flag_value(argv, "--port") == str(GRPC_PORT),
              f"Dockerfile stage {name}: entrypoint does not serve gRPC on {GRPC_PORT}")
        check(flag_value(argv, "--metrics-port") == str(METRICS_PORT),
              f"Dockerfile stage {name}: entrypoint does not serve metrics on {METRICS_PORT}")
    cuda_build = [l for n, ls in stages if n == "cuda-build" for l in ls]
    check(any("-DPAGODA_CUDA=ON" in l for l in cuda_build),
          "Dockerfile: the cuda build does not set -DPAGODA_CUDA=ON")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    families, sample_names = exported_metrics(a.bin, a.model)
    check("pagoda:num_requests_waiting" in families, "daemon: no pagoda:num_requests_waiting")
    check((families.get("pagoda:request_success_total") or set()) >= {"tenant", "finished_reason"},
          "daemon: pagoda:request_success_total lacks its tenant label after a request")
    docs = load_manifests(os.path.join(a.source, "deploy", "k8s"))
    kinds = {d["kind"] for _, d in docs}
    for kind in ("Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"):
        check(kind in kinds, f"deploy/k8s: no {kind}")
    for dep in by_kind(docs, "Deployment"):
        check_deployment(dep)
        check_selectors(docs, dep)
        check_hpa(docs, dep, sample_names)
    check_dashboard(os.path.join(a.source, "deploy", "grafana-dashboard.json"), families,
                    sample_names)
    check_dockerfile(os.path.join(a.source, "Dockerfile"))
    for f in failures:
        print("FAIL:", f)
    print(f"{len(docs)} manifests, {len(families)} metric families: "
          f"{'OK' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
