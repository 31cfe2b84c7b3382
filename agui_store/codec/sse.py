"""The SSE wire format (``text/event-stream``), read and written: what an AG-UI server sends.

:class:`SSEParser` reads it incrementally, on bytes, following the WHATWG event-stream rules:
lines end with LF, CR or CRLF (a chunk may end between the two); a line starting with ``:``
is a comment; ``name: value`` is a field, one space after the colon not part of the value,
and a line without a colon a field with an empty value; a blank line ends an event. An
AG-UI event lives in the ``data`` field alone, so ``event``, ``id``, ``retry`` and unknown
fields are skipped, and an event's payload is its ``data`` values joined by LF. A byte order
mark opening the stream is dropped by :meth:`SSEParser.feed`, as the UTF-8 decoding the rules
begin with drops it (``@ag-ui/client``'s ``TextDecoder`` does); :mod:`agui_store.codec.ingest`,
which hands the parser lines, strips it from a file before it tells the format.

:func:`encode_sse` writes one event. Pure: no I/O.
"""

from __future__ import annotations

from agui_store.codec.json import BOM
from agui_store.errors import InvalidEventError

__all__ = ["MAX_EVENT_BYTES", "SSEParser", "encode_sse"]

#: The largest SSE event :class:`SSEParser` holds while it arrives (bytes), by default.
MAX_EVENT_BYTES = 16 * 1024 * 1024


class SSEParser:
    """Incremental ``text/event-stream`` parser: bytes in, complete ``data`` payloads out.

    A chunk may end anywhere: inside a line, between the ``\\r`` and ``\\n`` of a CRLF,
    inside a UTF-8 sequence. A payload is the event's ``data`` lines joined by ``\\n``, each
    without its ``data:`` prefix and one optional space; comments and other fields are
    skipped. An event the stream does not end with a blank line comes out of :meth:`finish`.

    A reader that splits the lines itself (to count them, say) hands them to :meth:`line`
    one by one instead of calling :meth:`feed`.
    """

    __slots__ = (
        "_buffer", "_counting", "_data", "_opening", "_scanned", "_skip_lf", "dropped", "error",
        "held", "max_event_bytes",
    )

    def __init__(self, *, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        #: The largest payload an event may have (the official client fails at 10 MB, the
        #: store refuses events over its ``max_event_bytes``, 8 MiB by default). A larger one
        #: is refused whether it arrives in one chunk or in many, and is never held whole.
        self.max_event_bytes = max_event_bytes
        #: Why the stream stopped being read: its first event larger than
        #: :attr:`max_event_bytes` (``None``: none). From that event on, :meth:`read` gives
        #: no payload: each event is counted in :attr:`dropped` instead.
        self.error: InvalidEventError | None = None
        #: The events not given since :attr:`error`, the refused one included.
        self.dropped = 0
        # After the error: the event being counted has data.
        self._counting = False
        #: The bytes of ``data`` the unfinished event holds (each value and its line end):
        #: 0 when no ``data`` line has come since the last event ended.
        self.held = 0
        self._buffer = bytearray()
        # How much of the buffer holds no line end: a line arriving in many chunks is
        # searched once, not once a chunk (which cost the square of its length).
        self._scanned = 0
        self._data: list[bytes] = []
        # The previous chunk ended with "\r": a "\n" opening the next one belongs to it.
        self._skip_lf = False
        # The stream's first bytes while they may still be a byte order mark (``None`` once
        # they are known): it may arrive split across chunks.
        self._opening: bytes | None = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The payloads of the events this chunk completes, in order.

        Raises:
            InvalidEventError: an event is larger than :attr:`max_event_bytes` (what this
                chunk completed before it is lost with the exception: :meth:`read` keeps it).
        """
        refused = self.error
        done = self.read(chunk)
        if self.error is not None and self.error is not refused:
            raise self.error
        return done

    def read(self, chunk: bytes) -> list[bytes]:
        """The payloads of the events this chunk completes, in order, up to the first event
        larger than :attr:`max_event_bytes`: that one is refused (:attr:`error`), and it and
        every later event are counted in :attr:`dropped`, not given. How the stream is cut
        into chunks changes none of this."""
        if self._opening is not None:
            chunk = self._opening + chunk
            if BOM.startswith(chunk) and len(chunk) < len(BOM):
                self._opening = chunk
                return []
            self._opening = None
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM) :]
        if not chunk:
            return []
        done: list[bytes] = []
        limit = self.max_event_bytes
        if (
            not self._buffer and not self._data and not self._skip_lf and 0x0D not in chunk
            and self.error is None
        ):
            # The common case (every Python producer): LF line ends, the chunk starting at an
            # event. Whole events are cut with bytes.split; the rest goes the general way.
            *events, chunk = chunk.split(b"\n\n")
            for event in events:
                if self.error is None and event.startswith(b"data: ") and 0x0A not in event:
                    if len(event) - 6 <= limit:
                        done.append(event[6:])
                    else:
                        self._refuse()
                        self._counting = False
                        self.dropped += 1
                else:
                    for line in [*event.split(b"\n"), b""]:
                        self._take(line, done)
            if not chunk:
                return done
        buffer = self._buffer
        buffer += chunk
        start = 0
        if self._skip_lf:
            self._skip_lf = False
            if buffer[:1] == b"\n":
                start = 1
        end_of_buffer = len(buffer)
        scan = max(start, self._scanned)
        # The next CR and the next LF (-1: none left), each looked for with memchr and
        # again only once passed: a regular expression read the bytes ten times slower.
        cr, lf = buffer.find(b"\r", scan), buffer.find(b"\n", scan)
        while cr >= 0 or lf >= 0:
            if cr >= 0 and (lf < 0 or cr < lf):  # CR, or CRLF
                at = cr
                end = cr + 1
                if end == end_of_buffer:
                    self._skip_lf = True  # its LF, if any, opens the next chunk
                elif buffer[end] == 0x0A:
                    end += 1
            else:
                at, end = lf, lf + 1
            if self.error is None:  # _take, inline: this runs once a line
                payload = self.line(bytes(buffer[start:at]))
                if payload is not None:
                    done.append(payload)
                elif self.held > limit + 1:
                    self._refuse()
            else:  # counting: only a line's start tells what it is, a long one is not copied
                self._take(bytes(buffer[start : min(at, start + 5)]), done)
            start = end
            if 0 <= cr < end:
                cr = buffer.find(b"\r", end)
            if 0 <= lf < end:
                lf = buffer.find(b"\n", end)
        del buffer[:start]
        # The unended line: a data line whose value makes the event's payload larger than
        # the limit already refuses it, as it would once ended; of any other line (or
        # after the error), only its start is kept: it gives no payload.
        if len(buffer) > limit - self.held or self.error is not None:
            is_data = buffer.startswith(b"data:")
            if is_data and self.error is None and self.held + len(buffer) - 6 > limit:
                self._refuse()
            if self.error is not None or not is_data:
                del buffer[5:]
        self._scanned = len(buffer)
        return done

    def _take(self, line: bytes, done: list[bytes]) -> None:
        """Read one line, adding the payload of the event it ends to ``done``; after the
        error, count the events instead."""
        if self.error is None:
            payload = self.line(line)
            if payload is not None:
                done.append(payload)
            elif self.held > self.max_event_bytes + 1:  # held: the payload and one LF
                self._refuse()
        elif not line:
            if self._counting:
                self.dropped += 1
                self._counting = False
        elif line[:5] == b"data:" or line == b"data":
            self._counting = True

    def _refuse(self) -> None:
        """The event being read is larger than the limit: it is dropped, and the stream is
        only counted from here on."""
        self.error = InvalidEventError(
            f"an SSE event of the response exceeds {self.max_event_bytes:,} bytes"
        )
        self._data = []
        self.held = 0
        self._counting = True  # the refused event itself, counted at its end

    def finish(self) -> list[bytes]:
        """The stream ended normally: the payload of an event it did not end with a blank
        line. ``@ag-ui/client`` parses what is left in its buffer at the end of a response,
        so that event reached the client."""
        done: list[bytes] = []
        if self._buffer:
            self._take(bytes(self._buffer), done)  # an unended line ends no event
            self._buffer.clear()
            self._scanned = 0
        self._take(b"", done)
        return done

    def line(self, line: bytes) -> bytes | None:
        """Read one line, without its line end: the payload of the event a blank line ends,
        else ``None`` (an event without ``data`` ends with nothing to give)."""
        if not line:
            if not self._data:
                return None
            payload = b"\n".join(self._data)
            self._data = []
            self.held = 0
            return payload
        if line.startswith(b":"):
            return None  # a comment (keep-alive pings)
        name, colon, value = line.partition(b":")
        if name != b"data":
            return None  # id, event, retry: AG-UI events live in data alone
        if colon and value.startswith(b" "):
            value = value[1:]
        self._data.append(value)
        self.held += len(value) + 1
        return None


def encode_sse(payload: bytes, event_id: int | None = None) -> bytes:
    """One SSE event: ``id:`` (when given) and the payload as ``data:`` lines, then the blank
    line that ends it (``data: <json>\\n\\n`` for one line of JSON, as ``@ag-ui/encoder``
    writes it)."""
    # Searching for the byte as an int is memchr; for a one-byte bytes it is several
    # times slower, and this runs once an event.
    if 0x0A not in payload:
        if event_id is None:
            return b"data: " + payload + b"\n\n"
        return b"id: %d\ndata: %b\n\n" % (event_id, payload)
    head = b"id: %d\n" % event_id if event_id is not None else b""
    return head + b"".join(b"data: " + line + b"\n" for line in payload.split(b"\n")) + b"\n"
