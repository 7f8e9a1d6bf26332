"""Print what Keras 2's `model.fit(verbose=1)` prints for 2 epochs of 200 steps, byte for byte:
each update backs up over the previous one with `\\b` and starts again with `\\r`, and only the
last update of an epoch ends the line (tf_keras's Progbar, dynamic display)."""

import sys
import time

for epoch in (1, 2):
    sys.stdout.write(f"Epoch {epoch}/2\n")
    previous = 0
    for step in range(1, 201):
        done = step * 30 // 200
        bar = f"{step}/200 [{'=' * done}{'>' if step < 200 else ''}{'.' * (29 - done)}]"
        text = f"{bar} - ETA: 0s - loss: {1 / (epoch * step):.4f}"
        if step == 200:
            text = f"{bar} - 1s 5ms/step - loss: {1 / (epoch * 200):.4f}"
        sys.stdout.write("\b" * previous + "\r" + text + ("\n" if step == 200 else ""))
        sys.stdout.flush()
        previous = len(text)
        time.sleep(0.001)
