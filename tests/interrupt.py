"""Ctrl-C in a child process: run Python code that prints "start" before its long call, send SIGINT
half a second later, collect what it printed and how long it took to stop (test_sim, test_graph)."""
import os
import signal
import subprocess
import sys
import time


def interrupt_child(code, *args, after_s=0.5):
    """(printed lines, seconds from SIGINT to the child's next line)."""
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        assert p.stdout.readline().strip() == "start"
        time.sleep(after_s)
        sent = time.perf_counter()
        p.send_signal(signal.SIGINT)
        lines = [p.stdout.readline().strip()]
        latency = time.perf_counter() - sent
        lines += p.stdout.read().split("\n")
    finally:
        p.kill()
        p.wait()
    return lines, latency
