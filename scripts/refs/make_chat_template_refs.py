#!/usr/bin/env python3
"""Reference chat-template renderings from llama.cpp's server (/apply-template).

For each template file, starts llama-server on loopback with a tiny model and
`--jinja --chat-template-file T`, posts a fixed set of conversations and writes
one JSON file per template: the template's file name, the variables the server
passed besides messages (bos/eos texts, the date strings it computed, whether it
dropped a leading BOS) and, per case, the messages, add_generation_prompt and the
prompt the server returned.

Usage: make_chat_template_refs.py LLAMA_SERVER MODEL_GGUF OUT_DIR TEMPLATE...
"""
import datetime
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
USER1 = {"role": "user", "content": "Hello! What is 2 + 2?"}
ASSISTANT1 = {"role": "assistant", "content": "2 + 2 = 4."}
USER2 = {"role": "user", "content": "And times three?"}

CASES = [
    {"name": "system_user_gen", "messages": [SYSTEM, USER1], "add_generation_prompt": True},
    {"name": "user_gen", "messages": [USER1], "add_generation_prompt": True},
    {"name": "multiturn_system_gen", "messages": [SYSTEM, USER1, ASSISTANT1, USER2],
     "add_generation_prompt": True},
    {"name": "multiturn_nogen", "messages": [USER1, ASSISTANT1, USER2],
     "add_generation_prompt": False},
]


def post(port, body):
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/apply-template", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def wait_ready(port, proc):
    for _ in range(300):
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, ConnectionError):
            pass
        time.sleep(0.1)
    return False


def render_template(server, model, template, port):
    proc = subprocess.Popen(
        [server, "-m", model, "--host", "127.0.0.1", "--port", str(port), "--jinja",
         "--chat-template-file", template, "-c", "256", "-np", "1", "--no-webui"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        if not wait_ready(port, proc):
            err = proc.stderr.read().decode(errors="replace") if proc.poll() is not None else ""
            raise RuntimeError(f"server did not start for {template}: {err[-2000:]}")
        now = datetime.datetime.now()
        cases = []
        for case in CASES:
            # enable_thinking is passed explicitly: left to the server, it becomes true
            # only for templates its capability probe finds thinking support in.
            body = {"messages": case["messages"],
                    "add_generation_prompt": case["add_generation_prompt"],
                    "chat_template_kwargs": {"enable_thinking": True}}
            cases.append(dict(case, prompt=post(port, body)["prompt"]))
        return now, cases
    finally:
        proc.terminate()
        proc.wait()


def main():
    server, model, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    port = 18931
    for template in sys.argv[4:]:
        name = os.path.basename(template).removesuffix(".jinja")
        try:
            now, cases = render_template(server, model, template, port)
        except Exception as e:  # record and go on: one template's failure is data too
            print(f"FAIL {name}: {e}", file=sys.stderr)
            continue
        ref = {
            "template": os.path.basename(template),
            # The model's vocabulary texts (stories260K: <s>, </s>); the server drops a
            # leading BOS text because that vocabulary adds BOS when tokenizing.
            "bos_token": "<s>", "eos_token": "</s>", "strip_leading_bos": True,
                # What llama.cpp's chat code adds to every render: the date strings
            # (common_chat_extra_context), the enable_thinking kwarg sent above, and the
            # server's default preserve_reasoning=true kwarg with the variables it sets
            # (caps_apply_preserve_reasoning in common/jinja/caps.cpp).
            "context": {"date_string": now.strftime("%d %b %Y"),
                        "datetime": now.strftime("%b %d %Y"), "enable_thinking": True,
                        "preserve_reasoning": True, "preserve_thinking": True,
                        "clear_thinking": False, "truncate_history_thinking": False,
                        "drop_thinking": False},
            "cases": cases,
        }
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump(ref, f, indent=1, ensure_ascii=False)
            f.write("\n")
        print(f"ok {name}")


if __name__ == "__main__":
    main()
