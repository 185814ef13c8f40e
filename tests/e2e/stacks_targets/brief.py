"""A target that exits while it is being sampled."""
import time

t0 = time.perf_counter()
print("ready", flush=True)
while time.perf_counter() - t0 < 0.6:
    pass
