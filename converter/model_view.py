"""A model served to Netron, the graph viewer, on a local port (the ``view`` extra).

Netron (``pip install netron``: one pure-Python package with its web app inside, no
other dependency, works offline) draws the graph in a browser; this module serves its
files and the model's bytes from a server bound to 127.0.0.1 alone, on a free port, in a
daemon thread.  The page is Netron's own, told three things: the model to open, not to
ask for cookie consent, and not to report usage (it is served as an unpackaged build,
which sends no telemetry and never asks to be updated).  A :class:`ModelView` shows
itself inline in Jupyter (an IFrame of the page) and stops with :meth:`ModelView.stop`.
"""

from __future__ import annotations

import html
import http.server
import os
import re
import threading
import urllib.parse
from typing import Any

from dsl.errors import DslError
from dsl.progress import progress

__all__ = ["ModelView", "serve_model", "viewer_folder", "ViewerMissingError"]

_MIME_TYPES = {
    ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".png": "image/png",
    ".ico": "image/x-icon", ".json": "application/json", ".svg": "image/svg+xml", ".woff": "font/woff",
    ".woff2": "font/woff2", ".ttf": "font/ttf",
}
_CHUNK = 1 << 20


class ViewerMissingError(DslError):
    """The graph viewer is not installed."""


def viewer_folder() -> str:
    """The folder of Netron's web app, or a :class:`ViewerMissingError` saying how to install it."""
    try:
        import netron
    except ImportError as error:
        raise ViewerMissingError(
            "the graph viewer needs Netron, which is not installed",
            hint="pip install 'onnxquill[view]' (or pip install netron)",
        ) from error
    return os.path.dirname(os.path.realpath(netron.__file__))


class ModelView:
    """A model served to Netron at :attr:`url` until :meth:`stop`; ``model`` is the proto
    shown (with the source links and observed values the viewer displays).

    >>> view = serve_model(model_proto.SerializeToString(), "model.onnx")   # doctest: +SKIP
    >>> view.url                                                             # doctest: +SKIP
    'http://127.0.0.1:41877/'
    """

    def __init__(self, server: http.server.ThreadingHTTPServer, thread: threading.Thread, name: str,
                 model: Any = None, height: int = 600) -> None:
        self.server = server
        self.thread = thread
        self.name = name
        self.model = model
        self.height = height
        self.observed: dict[str, Any] = {}

    @property
    def url(self) -> str:
        """The page's address (127.0.0.1 and the port chosen)."""
        return f"http://127.0.0.1:{self.server.server_port}/"

    @property
    def serving(self) -> bool:
        """Whether the server still answers."""
        return self.thread.is_alive()

    def stop(self) -> None:
        """Stop serving (the page stays open in a browser, but can no longer reload)."""
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()

    def wait(self) -> None:
        """Block until interrupted (Ctrl+C), then stop: what ``onnxquill view`` does."""
        try:
            self.thread.join()
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def _repr_html_(self) -> str:
        # What Jupyter shows for a view as a cell's value: the page in an IFrame.
        url = html.escape(self.url, quote=True)
        return (f'<iframe src="{url}" width="100%" height="{int(self.height)}" frameborder="0" '
                f'title="{html.escape(self.name, quote=True)}"></iframe>')

    def __repr__(self) -> str:
        state = "serving" if self.serving else "stopped"
        return f"<ModelView {self.name!r} {state} at {self.url}>"


def serve_model(model_bytes: bytes, name: str = "model.onnx", *, port: int = 0, model: Any = None,
                height: int = 600) -> ModelView:
    """Serve ``model_bytes`` (a serialized ModelProto called ``name``) to Netron on
    127.0.0.1 at ``port`` (0: a free one); returns the running :class:`ModelView`.

    >>> view = serve_model(onnx.load("model.onnx").SerializeToString())   # doctest: +SKIP
    >>> view.stop()                                                        # doctest: +SKIP
    """
    folder = viewer_folder()
    file_name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(name)) or "model.onnx"
    if not file_name.endswith(".onnx"):
        file_name += ".onnx"
    handler = _handler_class(folder, bytes(model_bytes), file_name, name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name=f"onnxquill view {file_name}", daemon=True)
    thread.start()
    return ModelView(server, thread, name, model, height)


def _index_page(folder: str, file_name: str, title: str) -> bytes:
    with open(os.path.join(folder, "index.html"), encoding="utf-8") as file:
        page = file.read()
    meta = "\n".join([
        '<meta name="type" content="Python">',
        '<meta name="version" content="0.0.0">',  # an unpackaged build: no telemetry, no update prompt
        f'<meta name="file" content="/data/{file_name}">',
        f'<meta name="identifier" content="{file_name}">',
        f'<meta name="name" content="{html.escape(title, quote=True)}">',
    ])
    page = re.sub(r'<meta name="date" content="[^"]*">\n?', "", page)
    page = re.sub(r'<meta name="version" content="[^"]*">', lambda _: meta, page)
    return page.encode("utf-8")


def _handler_class(folder: str, model_bytes: bytes, file_name: str, title: str) -> type:
    index = _index_page(folder, file_name, title)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.urlparse(self.path).path
            if path in ("/", "/index.html"):
                self._answer(index, _MIME_TYPES[".html"], consent=True)
            elif path == f"/data/{file_name}":
                self._send_model()
            else:
                self._send_file(path)

        def _answer(self, body: bytes, content_type: str, *, consent: bool = False) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            if consent:  # Netron asks for cookie consent unless this cookie is set; a local view reports nothing
                self.send_header("Set-Cookie", "consent=1; Path=/; SameSite=Strict")
            self.end_headers()
            self.wfile.write(body)

        def _send_model(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(model_bytes)))
            self.end_headers()
            view = memoryview(model_bytes)
            with progress(len(model_bytes), f"sending {file_name} to the viewer", unit="B", unit_scale=True) as bar:
                for start in range(0, len(view), _CHUNK):
                    self.wfile.write(view[start:start + _CHUNK])
                    bar.update(len(view[start:start + _CHUNK]))

        def _send_file(self, path: str) -> None:
            # Netron's own files only: a known extension, inside its folder
            relative = urllib.parse.unquote(path).lstrip("/")
            target = os.path.realpath(os.path.join(folder, relative))
            extension = os.path.splitext(target)[1]
            if (os.path.commonpath([folder, target]) != folder or extension not in _MIME_TYPES
                    or not os.path.isfile(target)):
                self.send_error(404)
                return
            with open(target, "rb") as file:
                self._answer(file.read(), _MIME_TYPES[extension])

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a request log would fill a notebook's output

    return Handler
