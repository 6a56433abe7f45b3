"""How the app drives a pystray icon from its own threads.

For every backend but one, pystray's public API is thread-safe enough: gtk and appindicator
hand each call to GLib's loop, win32 posts messages, and on macOS the app already calls from
the main thread (see :meth:`ragd.tray.app.TrayApp._on_gui_thread`).

The xorg backend is the exception. It hands each call (icon, title, show, stop) from the
calling thread to its loop thread as an X client message sent over the icon's own python-xlib
connection, while the loop thread reads events and makes round trips on that same connection.
python-xlib's threaded mode does not survive that: measured here, about one run in ten either
left the message queued and unsent (the caller waited forever, or Quit never ended the loop)
or deadlocked the loop thread inside a round trip. :class:`XorgDriver` therefore never touches
the icon's connection from another thread: it sends the very same client messages (pystray
registers one atom per call, ``_PYSTRAY__UPDATE_ICON`` and so on) over a connection of its
own, and pystray's loop thread runs the call and answers through its result queue as usual.
It relies on those pystray 0.19 internals, checked when the driver is made; anything
unexpected falls back to the public API.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import Any

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 10.0
_XORG_CALLS = ("_show", "_hide", "_update_icon", "_update_title", "_stop")


class IconDriver:
    """pystray's public API: what every backend but xorg gets."""

    def __init__(self, icon: Any) -> None:
        self.icon = icon

    def show(self) -> None:
        self.icon.visible = True

    def set_image(self, image: Any) -> None:
        self.icon.icon = image

    def set_title(self, title: str) -> None:
        self.icon.title = title

    def set_menu(self, menu: Any) -> None:
        self.icon.menu = menu

    def notify(self, message: str) -> None:
        if getattr(self.icon, "HAS_NOTIFICATION", False):
            with contextlib.suppress(Exception):  # no notification service, no bubble
                self.icon.notify(message, "ragd")

    def stop(self) -> None:
        with contextlib.suppress(Exception):  # gtk complains without a notification service
            self.icon.stop()

    def close(self) -> None:
        """Release what the driver holds; after the icon's loop has ended."""


class XorgDriver(IconDriver):
    """Runs each call on pystray's xorg loop thread without sharing its X connection."""

    def __init__(self, icon: Any) -> None:
        super().__init__(icon)
        from Xlib import X, display
        from Xlib.protocol import event

        self._x, self._event = X, event
        self._display = display.Display()
        self._display.set_error_handler(lambda *args: None)  # the window may be gone at stop
        self._window = self._display.create_resource_object("window", icon._window.id)
        self._atoms = {name: self._display.intern_atom(f"_PYSTRAY_{name.upper()}")
                       for name in _XORG_CALLS}
        self._lock = threading.Lock()

    def _on_loop_thread(self) -> bool:
        loop = getattr(self.icon, "_thread", None)
        return loop is not None and loop.ident == threading.get_ident()

    def _call(self, name: str) -> None:
        """Have the loop thread run the backend's ``name`` and wait for its answer."""
        if self._on_loop_thread():
            getattr(self.icon, name)()  # pystray runs it in place on its own thread
            return
        with self._lock:
            message = self._event.ClientMessage(window=self._window,
                                                client_type=self._atoms[name],
                                                data=(32, [0, 0, 0, 0, 0]))
            # No event mask: the message goes to the client that made the window, the icon.
            self._window.send_event(message, event_mask=self._x.NoEventMask)
            self._display.flush()
            try:
                result = self.icon._queue.get(timeout=CALL_TIMEOUT_S)
            except queue.Empty:
                raise TimeoutError(f"pystray's loop did not run {name} within "
                                   f"{CALL_TIMEOUT_S:g} s") from None
        if result is not True:
            raise result[1]

    def show(self) -> None:
        self._call("_update_icon")
        self._call("_show")
        self.icon._visible = True

    def set_image(self, image: Any) -> None:
        self.icon._icon = image
        self.icon._icon_valid = False
        if self.icon._visible:
            self._call("_update_icon")

    def set_title(self, title: str) -> None:
        self.icon._title = title
        if self.icon._visible:
            self._call("_update_title")

    def set_menu(self, menu: Any) -> None:
        self.icon._menu = menu  # the xorg backend has no menu to update: only the model

    def stop(self) -> None:
        if not self.icon._running:
            return
        try:
            self._call("_stop")
        except (TimeoutError, Exception):
            log.warning("could not stop the tray icon's loop", exc_info=True)
        self.icon._running = False

    def close(self) -> None:
        with self._lock, contextlib.suppress(Exception):
            self._display.close()


class GtkDriver(IconDriver):
    """pystray's gtk backend gives the title to ``Gtk.StatusIcon.set_title``, which XEmbed trays
    do not show: the driver sets the tooltip too, on GLib's loop like pystray's own calls."""

    def show(self) -> None:
        super().show()
        self._tooltip(str(self.icon.title or ""))

    def set_title(self, title: str) -> None:
        super().set_title(title)
        self._tooltip(title)

    def _tooltip(self, text: str) -> None:
        status_icon = getattr(self.icon, "_status_icon", None)
        if status_icon is None:
            return
        from gi.repository import GLib

        def apply() -> bool:
            status_icon.set_tooltip_text(text)
            return False  # once

        GLib.idle_add(apply)


def driver_for(icon: Any) -> IconDriver:
    """The driver for ``icon``'s backend."""
    if type(icon).__module__ == "pystray._gtk":
        return GtkDriver(icon)
    internals = ("_window", "_queue", "_running", "_rewrite_implementation", "_icon", "_title",
                 "_menu", "_visible")
    if type(icon).__module__ == "pystray._xorg":
        if all(hasattr(icon, name) for name in internals):
            try:
                return XorgDriver(icon)
            except Exception:
                log.warning("cannot open a second X connection; using pystray's own calls",
                            exc_info=True)
        else:
            log.warning("unexpected pystray xorg internals; using pystray's own calls")
    return IconDriver(icon)
