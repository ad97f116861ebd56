#!/usr/bin/env python3
"""The official OpenAI Node.js client (npm `openai`, major version 6) against a live
`pagoda serve --http-port`: installs the client into the build tree (once), starts the
daemon on stories260K with a chat template and two tenants, and runs one script of
tests/openai_node/ (--script; common.mjs, which they share, goes beside it): calls.mjs
(models, completions and chat whole and streamed until finish_reason, n = 2, logprobs,
logit_bias, echo, errors by class, abort), tools.mjs (structured outputs and tool calls,
read by the client's parse() and stream helpers; needs a template whose tool-call format
pagoda knows, such as Qwen2.5's Hermes) or ecosystem.mjs (prompt arrays in
lm-evaluation-harness's shapes, responses.create and responses.stream, reasoning_content;
on DeepSeek-R1's template).

Exit status 77 (ctest: skipped, with the reason printed) when node or npm is missing or
the npm registry cannot be reached."""

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CLIENT = "openai@6"


def skip(reason):
    print(f"SKIPPED: {reason}")
    sys.exit(77)


def install_client(work):
    package = os.path.join(work, "node_modules", "openai", "package.json")
    os.makedirs(work, exist_ok=True)
    # Tests sharing the folder may run at once (ctest -j): one installs, the others wait.
    lock = open(os.path.join(work, ".install.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not os.path.exists(package):
        try:
            r = subprocess.run(["npm", "install", "--prefix", work, "--no-audit", "--no-fund",
                                "--loglevel", "error", CLIENT],
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            skip(f"npm install {CLIENT} timed out (no registry?)")
        if r.returncode != 0 or not os.path.exists(package):
            skip(f"npm install {CLIENT} failed: {r.stderr.strip()[-500:]}")
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()
    with open(package) as f:
        return json.load(f)["version"]


def digest(key):
    return hashlib.sha256(key.encode()).hexdigest()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--chat-template", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--script", default="calls.mjs", help="a script of tests/openai_node/")
    args = p.parse_args()
    if shutil.which("node") is None or shutil.which("npm") is None:
        skip("node or npm is not installed")
    version = install_client(args.work)
    print(f"openai (Node.js) {version}, node {subprocess.check_output(['node', '--version'], text=True).strip()}")
    # Beside node_modules, where import finds it, with the module the scripts share.
    script = os.path.join(args.work, args.script)
    sources = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openai_node")
    for name in (args.script, "common.mjs"):
        shutil.copyfile(os.path.join(sources, name), os.path.join(args.work, name))
    with tempfile.TemporaryDirectory() as tmp:
        tenants = os.path.join(tmp, "tenants.json")
        with open(tenants, "w") as f:
            json.dump({"tenants": [
                {"name": "main", "api_key_sha256": [digest("sesame")]},
                {"name": "limited", "api_key_sha256": [digest("frugal")],
                 "tokens_per_minute": 30}]}, f)
        log_path = os.path.join(tmp, "daemon.log")
        with open(log_path, "w") as log:
            daemon = subprocess.Popen(
                [os.path.join(args.bin, "pagoda"), "serve", "--model", args.model,
                 "--chat-template", args.chat_template, "--tenants", tenants, "--host",
                 "127.0.0.1", "--port", "0", "--metrics-port", "0", "--http-port", "0"],
                stdout=log, stderr=subprocess.STDOUT)
        try:
            port = None
            deadline = time.time() + 60
            while port is None and time.time() < deadline and daemon.poll() is None:
                m = re.search(r"OpenAI-compatible HTTP on [0-9.]+:(\d+)", open(log_path).read())
                port = int(m.group(1)) if m else None
                time.sleep(0.05)
            if port is None:
                print("daemon did not start:\n" + open(log_path).read())
                return 1
            r = subprocess.run(["node", script, f"http://127.0.0.1:{port}/v1", "sesame",
                                "frugal"], timeout=300)
            if r.returncode != 0:
                print(f"node exited with status {r.returncode}; the daemon's log:\n"
                      + open(log_path).read()[-4000:])
            return r.returncode
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)


if __name__ == "__main__":
    sys.exit(main())
