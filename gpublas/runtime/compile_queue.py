"""Compiles in the background: a queue of jobs run by one thread per core, each job's result a Future.

Compilers run as subprocesses (g++, nvcc), so threads overlap them; a thread waiting on a compiler
holds no lock a launch needs. The threads are started on the first job and are not daemons: a
compile under way when the program ends finishes (its files land in the cache whole), but no queued
job starts once the main thread has ended (the rest are cancelled), so a program that exits early is
not kept alive by compiles it no longer needs.
"""
import os
import queue
import threading
from concurrent.futures import Future

_jobs = queue.Queue()
_threads = []
_lock = threading.Lock()


def workers():
    """How many jobs run at once: one per core (os.sched_getaffinity where the OS has it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def in_worker():
    """Whether the calling thread is one of the queue's (a compile nobody waits for yet)."""
    return threading.current_thread() in _threads


def submit(fn, *args):
    """A Future of fn(*args), run on a background thread. A job not yet started can be cancelled
    (Future.cancel), e.g. by a caller that would rather run it itself at once."""
    future = Future()
    with _lock:
        _jobs.put((future, fn, args))
        if len(_threads) < workers():
            t = threading.Thread(target=_work, name=f"gpublas-compile-{len(_threads)}")
            _threads.append(t)
            t.start()
    return future


def _work():
    """Runs jobs until the queue is empty (then the thread ends: an idle program holds no thread)."""
    while True:
        with _lock:
            try:
                future, fn, args = _jobs.get_nowait()
            except queue.Empty:
                _threads.remove(threading.current_thread())
                return
        if not threading.main_thread().is_alive():  # the program is ending: nobody will wait for this
            future.cancel()
            continue
        if not future.set_running_or_notify_cancel():  # cancelled while queued
            continue
        try:
            future.set_result(fn(*args))
        except BaseException as e:  # noqa: B902 - handed to whoever waits, as Future does
            future.set_exception(e)
