"""Memory that changes under the reader: new code objects compiled and dropped all the time,
recursion of varying depth, threads that start and end."""
import random
import threading

rnd = random.Random(1)


def recurse(n):
    if n <= 0:
        return sum(range(50))
    return recurse(n - 1) + 1


def short_thread():
    recurse(rnd.randrange(1, 60))


print("ready", flush=True)
i = 0
while True:
    i += 1
    src = "def f_%d(n):\n    return [x * %d for x in range(n)]\n" % (i, i)
    ns = {}
    exec(compile(src, "<churn %d>" % i, "exec"), ns)
    ns["f_%d" % i](200)
    recurse(rnd.randrange(1, 200))
    if i % 50 == 0:
        t = threading.Thread(target=short_thread)
        t.start()
        t.join()
