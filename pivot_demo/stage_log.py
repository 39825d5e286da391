"""How the demo reports progress: one line per finished stage, a progress bar inside each."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any


class StageLog:
    """One line per finished stage (elapsed time) and a progress bar inside each stage.

    Args:
        console: a rich console; output is off when None.
    """

    def __init__(self, console: Any = None) -> None:
        self.console = console
        self.started = time.perf_counter()
        self.stages: dict[str, float] = {}

    def line(self, text: str) -> None:
        """A line of text (no markup)."""
        if self.console is not None:
            self.console.print(text, markup=False, highlight=False)

    @contextlib.contextmanager
    def stage(self, name: str, total: int) -> Iterator[Callable[..., None]]:
        """`with log.stage("sft", steps) as advance: ... advance(n, info="...")`."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        t0 = time.perf_counter()
        info: dict[str, str] = {"text": ""}
        columns = (
            TextColumn(f"[bold]{name:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"),
        )
        with Progress(*columns, console=self.console, transient=True, disable=self.console is None) as bar:
            task = bar.add_task(name, total=max(total, 1), info="")

            def advance(n: int = 1, info_text: str | None = None) -> None:
                if info_text is not None:
                    info["text"] = info_text
                bar.update(task, advance=n, info=info["text"])

            yield advance
        self.stages[name] = self.stages.get(name, 0.0) + time.perf_counter() - t0
        total_s = time.perf_counter() - self.started
        self.line(f"[{total_s:6.0f} s] {name}: {time.perf_counter() - t0:.0f} s {info['text']}".rstrip())


def cpu_threads() -> int:
    """Torch threads for this machine now: 1 when it is already busy, else every core.

    On a loaded machine (load average >= cores) OpenMP worker threads wait for cores that other
    processes hold: a forward+backward of the quick model took 0.75 s with one thread and 5-9 s
    with two at load 9 on 2 cores. On an idle machine two threads are faster.
    """
    cores = os.cpu_count() or 1
    return 1 if os.getloadavg()[0] >= cores else cores
