"""The monitor's log buffer folds progress bars as a terminal does, also across the entries the runner
splits a long line into: entries made by the runner's own capture (`ReplicaLog`) and turned into log
entries as the local service serves them."""

from __future__ import annotations

from pathlib import Path

from jupyter_ext.runner.logs import LogLine, ReplicaLog
from jupyter_ext.service.logs.entries import line_to_entry
from widgets.logbuffer import ALL, Line, LogBuffer

STEPS = 2400  # a long Keras epoch: its line is longer than one entry


def bar(step: int, epoch: int) -> str:
    """What tf_keras's Progbar shows at a step."""
    done = step * 30 // STEPS
    arrow = ">" if step < STEPS else ""
    if step < STEPS:
        return f"{step}/{STEPS} [{'=' * done}{arrow}{'.' * (29 - done)}] - ETA: 1s - loss: {1 / (epoch * step):.4f}"
    return f"{step}/{STEPS} [{'=' * 30}] - 12s 5ms/step - loss: {1 / (epoch * step):.4f}"


def test_a_long_epoch_is_one_line_shown_in_progress_then_replaced(tmp_path: Path) -> None:
    buffer = LogBuffer()
    entries: list[Line] = []

    def on_lines(task: str, stream: str, stamp: str, lines: list[str]) -> None:
        for n, text in enumerate(lines):
            entry = line_to_entry("1", "local", task, n, LogLine(stamp, stream, text))
            entries.append(Line(task, stamp[11:23], entry["textPayload"], entry["severity"]))
        buffer.add(entries[-len(lines):])

    def stdout_shown() -> list[str]:
        return [line.text for line in buffer.lines("workerpool0-0") if line.severity == "INFO"]

    primary = ReplicaLog("workerpool0-0", tmp_path / "workerpool0-0.log", on_lines)
    worker = ReplicaLog("workerpool1-0", tmp_path / "workerpool1-0.log", on_lines)
    in_progress: list[tuple[int, int, list[str]]] = []  # (epoch, step being written, the primary's lines then)
    for epoch in (1, 2):
        primary("stdout", f"Epoch {epoch}/2\n".encode())
        previous = 0
        for step in range(1, STEPS + 1):
            text = bar(step, epoch)
            seen = len(entries)
            primary("stdout", ("\b" * previous + "\r" + text + ("\n" if step == STEPS else "")).encode())
            previous = len(text)
            if step < STEPS and len(entries) > seen:
                in_progress.append((epoch, step, stdout_shown()))
            if step % 700 == 0:  # other streams and replicas go on meanwhile
                primary("stderr", f"warning at step {step}\n".encode())
                worker("stdout", f"worker step {step}\n".encode())
    primary.close()
    worker.close()

    finals = [bar(STEPS, 1), bar(STEPS, 2)]
    assert sum(line.task_name == "workerpool0-0" and line.severity == "INFO" for line in entries) > 4  # split
    # while an epoch runs: its bar at the step being written, in one line after the epoch's title
    before = {1: ["Epoch 1/2"], 2: ["Epoch 1/2", finals[0], "Epoch 2/2"]}
    assert {epoch for epoch, _, _ in in_progress} == {1, 2}
    for epoch, step, shown in in_progress:
        assert shown[:-1] == before[epoch]
        assert shown[-1].startswith((f"{step - 1}/{STEPS} [", f"{step}/{STEPS} [")), (step, shown[-1][:40])
    # done: one line per epoch, the bar as it ended, and the other lines where they came
    assert stdout_shown() == ["Epoch 1/2", finals[0], "Epoch 2/2", finals[1]]
    warnings = [f"warning at step {s}" for s in range(700, STEPS + 1, 700)]
    assert [line.text for line in buffer.lines("workerpool0-0") if line.severity == "ERROR"] == warnings * 2
    assert buffer.count("workerpool0-0") == 4 + len(warnings) * 2
    everything = [line.text for line in buffer.lines(ALL)]
    assert [text for text in everything if "/2" in text] == ["Epoch 1/2", finals[0], "Epoch 2/2", finals[1]]
    # in place: where the bar was first shown, before what came while the epoch went on
    first_shown = in_progress[0][1]
    assert first_shown < 2100 and everything.index(finals[0]) < everything.index("worker step 2100")
    # the file keeps every update as written
    written = (tmp_path / "workerpool0-0.log").read_bytes()
    assert written.count(b"\r") == 2 * STEPS


def test_the_replicas_of_a_usual_job_have_colours_of_their_own() -> None:
    from widgets.logbuffer import colour

    tasks = ["workerpool0-0", *(f"workerpool1-{i}" for i in range(4)), "workerpool2-0", "workerpool2-1",
             "workerpool3-0", "workerpool3-1"]
    assert len({colour(task) for task in tasks}) == len(tasks)


def test_a_filter_that_matches_nothing_says_so() -> None:
    from widgets.monitor import JobMonitor

    monitor = JobMonitor()
    monitor.add_lines([Line("workerpool0-0", "10:00:00.000", "epoch 1", "INFO")])
    monitor._search.value = "zzz"  # as typed into the filter box
    assert "no line matches the filter" in monitor._views[ALL].value
    monitor._search.value = ""
    assert "epoch 1" in monitor._views[ALL].value
