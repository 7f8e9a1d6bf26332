"""`BuildProgress`: the steps of an image build with cache hits, per-layer push
progress bars, the final image and digest; a failure in red with its step.

It renders the typed events of `jupyter_ext.images` and nothing else; `add()`
may be called from any thread.
"""

from __future__ import annotations

import html
import threading
from typing import Any

import ipywidgets as w

from jupyter_ext import images


class BuildProgress(w.VBox):
    def __init__(self, **kwargs: Any) -> None:
        self._steps = w.HTML()
        self._layers = w.VBox()
        self._result = w.HTML()
        self._bars: dict[str, w.FloatProgress] = {}
        self._lines: list[str] = []
        self._text: list[str] = []  # the steps and the outcome as plain text
        self._lock = threading.Lock()
        self.image = ""
        self.digest = ""
        self.error = ""
        super().__init__([self._steps, self._layers, self._result], **kwargs)

    def add(self, event: images.Event) -> None:
        with self._lock, self.hold_sync():
            if isinstance(event, images.BuildStep):
                cached = ' <span style="color:#2e7d32">(cached)</span>' if event.cached else ""
                self._lines.append(f"Step {event.n}/{event.total} <code>{html.escape(event.text)}</code>{cached}")
                self._steps.value = "<br>".join(self._lines)
                self._text.append(f"Step {event.n}/{event.total} {event.text}{' (cached)' if event.cached else ''}")
            elif isinstance(event, images.LayerProgress) and event.total:
                bar = self._bars.get(event.layer_id)
                if bar is None:
                    bar = self._bars[event.layer_id] = w.FloatProgress(min=0, max=1, description=event.layer_id[:12])
                    self._layers.children = list(self._bars.values())
                bar.value = min(1.0, event.current / event.total)
            elif isinstance(event, images.Built):
                self.image = event.tags[0] if event.tags else event.image_id
                self._result.value = f"built <code>{html.escape(self.image)}</code>"
                self._text.append(f"built {self.image}")
            elif isinstance(event, (images.Pushed, images.Pulled)):
                self.image, self.digest = event.ref, event.digest
                self._result.value = f"image <code>{html.escape(event.ref)}</code> digest <code>{event.digest}</code>"
                self._text.append(f"image {event.ref} digest {event.digest}")
            elif isinstance(event, images.Failure):
                self.error = event.message
                self._result.value = f'<span style="color:#c62828">{html.escape(event.message)}</span>'
                self._text.append(event.message)

    def to_html(self) -> str:
        return f"{self._steps.value}<br>{self._result.value}"

    def to_text(self) -> str:
        """The steps and the outcome as plain text (what a saved notebook keeps where widgets do not render)."""
        with self._lock:
            return "\n".join(self._text)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.to_html()
        bundle["text/plain"] = self.to_text()
        return bundle
