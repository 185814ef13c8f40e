"""Threads in known states for --dump: the main thread computes in main_loop through a
generator, one waits on an Event (a futex), one sleeps, one blocks in recv on a socketpair."""
import socket
import threading
import time


def waiter(ev):
    ev.wait()  # LINE_WAIT


def sleeper():
    while True:
        time.sleep(1)  # LINE_SLEEP


def reader(s):
    s.recv(10)  # LINE_RECV


def numbers():
    i = 0
    while True:
        yield i * i  # LINE_GEN
        i += 1


def main_loop():
    total = 0
    for v in numbers():  # LINE_MAIN
        total += v


ev = threading.Event()
a, b = socket.socketpair()
threading.Thread(target=waiter, args=(ev,), daemon=True).start()
threading.Thread(target=sleeper, daemon=True).start()
threading.Thread(target=reader, args=(a,), daemon=True).start()
time.sleep(0.2)
print("ready", flush=True)
main_loop()
