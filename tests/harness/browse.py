#!/usr/bin/env python3
"""Loads a page in headless Chromium, waits until a JavaScript condition holds in it, then prints its DOM.

usage: browse.py CHROMIUM PROFILE_DIR URL CONDITION [SECONDS]

Chromium's own --dump-dom --virtual-time-budget cannot wait for a server: virtual time runs on while a fetch or a
stream is open (a 20 s budget ran out in 4 s of real time with the answer still on its way), so a slow server (a
sanitizer build, a loaded machine) left the page unanswered. Here the wait is real time: the condition is polled
over the DevTools protocol (--remote-debugging-pipe: JSON messages ending in a NUL byte, commands on Chromium's fd 3,
replies on its fd 4) until it is true or SECONDS (default 120) have passed. The DOM is printed either way; the exit
code is 0 when the condition held, 1 when the time ran out, 2 on a usage or protocol error."""
import json
import os
import select
import subprocess
import sys
import time


class Pipe:
    def __init__(self, write_fd, read_fd, deadline):
        self.write_fd, self.read_fd, self.deadline = write_fd, read_fd, deadline
        self.buf, self.next_id = b"", 0

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.write_fd, data):]
        while True:  # events and replies to other sessions come in between: skip them
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"].get("message")))
                return reply.get("result", {})

    def receive(self):
        while b"\0" not in self.buf:
            # a reply is due at once; the deadline only bounds a Chromium that stopped answering
            left = max(self.deadline + 30 - time.monotonic(), 0.1)
            if not select.select([self.read_fd], [], [], left)[0]:
                raise RuntimeError("Chromium did not answer")
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)


def main():
    if len(sys.argv) not in (5, 6):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    chromium, profile, url, cond = sys.argv[1:5]
    seconds = float(sys.argv[5]) if len(sys.argv) == 6 else 120.0
    deadline = time.monotonic() + seconds
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()

    def on_fds_3_and_4():  # in the child, before exec; via spare copies so that neither dup2 clobbers the other
        a, b = os.dup(cmd_r), os.dup(rep_w)
        os.dup2(a, 3)
        os.dup2(b, 4)

    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=on_fds_3_and_4, close_fds=False)
    os.close(cmd_r)
    os.close(rep_w)
    pipe = Pipe(cmd_w, rep_r, deadline)
    rc = 1
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        pipe.call("Page.navigate", {"url": url}, session)
        while True:
            r = pipe.call("Runtime.evaluate", {"expression": cond, "returnByValue": True}, session)
            if r.get("result", {}).get("value") is True:
                rc = 0
                break
            if time.monotonic() >= deadline:
                print("browse: '%s' still false after %g s" % (cond, seconds), file=sys.stderr)
                break
            time.sleep(0.2)
        dom = pipe.call("Runtime.evaluate", {"expression": "document.documentElement.outerHTML",
                                             "returnByValue": True}, session)
        print(dom.get("result", {}).get("value", ""))
        try:
            pipe.call("Browser.close")
        except RuntimeError:
            pass  # it may close the pipe before it answers
    except (RuntimeError, OSError, ValueError, KeyError) as e:
        print("browse: %s" % e, file=sys.stderr)
        rc = 2
    finally:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return rc


if __name__ == "__main__":
    sys.exit(main())
