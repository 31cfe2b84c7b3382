"""The compacted-message-snapshot artifact ``ag-ui.compacted-message-snapshot.export.v1``
(docs/design/behaviour.md#interchange).

A small JSON object that labels one finished run and carries its conversation as plain text::

    {
      "schema": "ag-ui.compacted-message-snapshot.export.v1",
      "framework": "ag_ui",
      "surface": "compacted_message_snapshot_artifact",
      "thread_id_ref": "thread_123",
      "run_id_ref": "run_456",
      "started_at": "2026-04-14T19:00:00.000Z",
      "messages": [{"id": "m1", "role": "user", "content": "Hello"},
                   {"id": "m2", "role": "assistant", "content": "Hi there"}],
      "terminal_event": "RUN_FINISHED",
      "finished_at": "2026-04-14T19:00:02.000Z"
    }

Where the contract comes from
-----------------------------
AG-UI itself ships no such wrapper. The artifact is defined by the Assay project's AG-UI lane
(``Rul1an/assay``): the plan ``docs/architecture/PLAN-P20-AG-UI-COMPACTED-MESSAGE-SNAPSHOT-
ARTIFACT-EVIDENCE-2026q2.md`` (§8 "v1 artifact contract", §12 the frozen shape) and its
reference reader ``examples/ag-ui-compacted-message-snapshot-evidence/map_to_assay.py`` with
the fixtures ``valid.ag-ui.json``, ``failure.ag-ui.json`` and ``malformed.ag-ui.json`` (a
top-level ``state`` bag, rejected). What they say, and what this module therefore checks:

* Exactly the eight required fields (``schema``, ``framework``, ``surface``,
  ``thread_id_ref``, ``run_id_ref``, ``started_at``, ``messages``, ``terminal_event``) and
  the four optional ones (``finished_at``, ``parent_run_id_ref``, ``error_code``,
  ``error_message``); any other field is malformed ("must not smuggle in additional AG-UI
  event families ... malformed, not best-effort partial import", plan §12).
* ``schema`` is the exact string above. ``framework`` "names the upstream protocol context"
  and ``surface`` "names the bounded seam"; the reference reader accepts only ``"ag_ui"`` and
  ``"compacted_message_snapshot_artifact"``, so those are this module's defaults
  (:data:`FRAMEWORK`, :data:`SURFACE`). A caller may choose other labels on both sides
  (``export_artifact(framework=...)`` / ``validate_artifact(framework=...)``, ``None`` for
  "any non-empty label"), at the price of artifacts the reference reader refuses.
* ``thread_id_ref``, ``run_id_ref``, ``parent_run_id_ref`` are opaque ids: non-empty, at
  most 96 characters, never a URL (anything containing ``://``).
* ``messages``: a non-empty ordered list; each message exactly ``id``, ``role``, ``content``
  and optional ``name``; ``id`` non-empty, at most 96 characters, unique in the list;
  ``role`` one of ``user``, ``assistant``, ``system``, ``developer``, ``tool`` (AG-UI's text
  roles: no ``reasoning``, no ``activity``); ``content`` a non-empty plain-text string ("a
  plain-text, role-labeled, ordered normalized subset", plan §8.3) of at most 400
  characters; ``name`` non-empty, at most 60 characters.
* ``terminal_event`` is ``"RUN_FINISHED"`` or ``"RUN_ERROR"``. ``error_code`` (at most 48
  characters) and ``error_message`` (at most 200) appear only with ``RUN_ERROR``, and
  ``error_message`` is **required** with it (the reference reader refuses a ``RUN_ERROR``
  artifact without one; the format lists both as optional overall, which this refines).
* ``started_at`` / ``finished_at`` are RFC 3339 timestamps; ``finished_at`` is not earlier
  than ``started_at`` (compared as instants, as the reference reader does since it stopped
  comparing strings).

Where the reference reader is lenient, this validator is stricter, so that an artifact it
accepts is one the reference reader imports unchanged: timestamps must carry a time zone
(``Z`` or ``±hh:mm``, upper-case ``T``/``Z``; the reader assumes UTC for a naive one), must
be strings (the reader calls ``str()`` on anything), and leap seconds are refused; ids and
refs may not have surrounding white space (the reader strips it, which could merge two ids);
lengths are measured on the value as given (the reader strips first); strings must be valid
Unicode (no lone surrogates); duplicate JSON keys are refused by :func:`load_artifact`, as
by the reader; ``NaN``/``Infinity`` are not JSON.

Exporting a run (decisions of this library, where the sources are silent)
------------------------------------------------------------------------
:func:`export_artifact` reduces a restored view (:class:`~agui_store.records.Checkout`) to
the contract:

* Text only. String content is kept; a list of content parts becomes its text parts joined
  with ``"\\n"`` (the usual flattening; image, audio, video and document parts are dropped).
  A message left with no text (an assistant message that only calls tools, an image-only
  user message, an empty tool result) is dropped. Tool calls are dropped (the contract has
  no field for them); tool results stay, as ``role: "tool"`` text. ``reasoning`` and
  ``activity`` messages are dropped (not in the role set; the plan excludes encrypted
  reasoning and frontend activity). ``toolCallId``, ``metadata``, ``encryptedValue`` and
  every other field are not carried.
* Content longer than 400 characters is cut to 400 with the ``…`` marker (see
  :func:`agui_store.exports.slim.truncate_text`); so are ``error_message`` (200) and ``error_code``
  (48). A ``name`` that does not fit (empty or over 60 characters) is omitted, since it is
  optional. Ids are never cut: a message id, thread id or run id the contract cannot carry
  makes the export fail with :class:`ArtifactError`; an unusable lineage parent is omitted.
* Of messages that share an id, the first one with text is kept and the others are skipped
  (ids must be unique in the artifact). Real producers do share ids: the .NET server's
  tool-calling samples give the assistant message that calls a tool and the tool's result
  the tool call's id; the call-only
  assistant message has no text, so the result is the message kept.
* ``terminal_event`` follows the run's status: ``finished``, ``interrupted`` and
  ``cancelled`` runs ended with ``RUN_FINISHED``; ``error`` runs with ``RUN_ERROR`` (also a
  late ``RUN_ERROR`` after ``RUN_FINISHED``: the last terminal event counts, as in
  :meth:`~agui_store.store.Store.reconnect_stream`). An ``incomplete`` run has no terminal event
  and cannot produce an artifact: :class:`ArtifactError`.
* ``error_message``/``error_code`` come from the run's last ``RUN_ERROR`` event (pass it as
  ``terminal=``; :func:`export_run` does). ``RUN_ERROR.message`` may be empty, and without
  the event nothing is known: the message is then :data:`UNKNOWN_ERROR_MESSAGE`.
* ``started_at``/``finished_at`` are when agui-store recorded the run's first and last
  event (``Run.created_at``/``Run.updated_at``), in UTC with milliseconds
  (``2026-04-14T19:00:00.123Z``): the store's clock, one source for both, not the
  producers' optional event timestamps.
* ``parent_run_id_ref`` is the run's lineage parent in the store (docs/design/lineage.md),
  when it has one.
* A run whose view holds no text message at all cannot produce an artifact (``messages``
  must not be empty): :class:`ArtifactError`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import IO, TYPE_CHECKING, Any, NoReturn

from agui_store.engine.arguments import a_kind
from agui_store.errors import AguiStoreError, ArgumentTypeError
from agui_store.exports.slim import truncate_text
from agui_store.protocol.validate import kind_of, render_path
from agui_store.records import Checkout

if TYPE_CHECKING:
    from agui_store.store import Store

__all__ = [
    "FRAMEWORK",
    "MAX_CONTENT_LENGTH",
    "MAX_ERROR_CODE_LENGTH",
    "MAX_ERROR_MESSAGE_LENGTH",
    "MAX_MESSAGE_ID_LENGTH",
    "MAX_NAME_LENGTH",
    "MAX_REF_LENGTH",
    "MESSAGE_FIELDS",
    "MESSAGE_ROLES",
    "OPTIONAL_FIELDS",
    "REQUIRED_FIELDS",
    "SCHEMA",
    "SURFACE",
    "TERMINAL_EVENTS",
    "UNKNOWN_ERROR_MESSAGE",
    "ArtifactError",
    "dumps_artifact",
    "export_artifact",
    "export_run",
    "load_artifact",
    "validate_artifact",
]

SCHEMA = "ag-ui.compacted-message-snapshot.export.v1"
FRAMEWORK = "ag_ui"
SURFACE = "compacted_message_snapshot_artifact"

REQUIRED_FIELDS = (
    "schema",
    "framework",
    "surface",
    "thread_id_ref",
    "run_id_ref",
    "started_at",
    "messages",
    "terminal_event",
)
OPTIONAL_FIELDS = ("finished_at", "parent_run_id_ref", "error_code", "error_message")
MESSAGE_FIELDS = ("id", "role", "content", "name")
MESSAGE_ROLES = ("user", "assistant", "system", "developer", "tool")
TERMINAL_EVENTS = ("RUN_FINISHED", "RUN_ERROR")

MAX_REF_LENGTH = 96
MAX_MESSAGE_ID_LENGTH = 96
MAX_NAME_LENGTH = 60
MAX_CONTENT_LENGTH = 400
MAX_ERROR_CODE_LENGTH = 48
MAX_ERROR_MESSAGE_LENGTH = 200

#: ``error_message`` of a ``RUN_ERROR`` artifact when the run's error said nothing.
UNKNOWN_ERROR_MESSAGE = "the run ended with RUN_ERROR (no error message was recorded)"

_ALL_FIELDS = frozenset(REQUIRED_FIELDS + OPTIONAL_FIELDS)
_STATUS_TERMINAL = {
    "finished": "RUN_FINISHED",
    "interrupted": "RUN_FINISHED",
    "cancelled": "RUN_FINISHED",
    "error": "RUN_ERROR",
}
# RFC 3339 date-time (section 5.6), ASCII digits only.
_TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)


class ArtifactError(AguiStoreError, ValueError):
    """An artifact breaks the v1 contract, or a run cannot be exported as one.

    Attributes:
        path: JSON path of the offending value (``$`` is the artifact itself).
        reason: what is wrong, without the path.
    """

    def __init__(self, reason: str, *, path: str = "$") -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}")


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------

_Path = list[str | int]


def _fail(reason: str, path: _Path) -> NoReturn:
    raise ArtifactError(reason, path=render_path(path))


def _string(value: Any, path: _Path) -> str:
    if not isinstance(value, str):
        _fail(f"expected a string, got {kind_of(value)}", path)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _fail("not valid Unicode text (it holds a lone surrogate)", path)
    return value


def _text(value: Any, path: _Path, limit: int) -> str:
    """A non-blank string of at most ``limit`` characters."""
    text = _string(value, path)
    if not text.strip():
        _fail("must not be empty or only white space", path)
    if len(text) > limit:
        _fail(f"must be at most {limit} characters, got {len(text)}", path)
    return text


def _identifier(value: Any, path: _Path, limit: int) -> str:
    """An opaque id: non-blank, no surrounding white space, at most ``limit`` characters."""
    ident = _text(value, path, limit)
    if ident != ident.strip():
        _fail("must not begin or end with white space (ids are compared exactly)", path)
    return ident


def _ref(value: Any, path: _Path) -> str:
    ref = _identifier(value, path, MAX_REF_LENGTH)
    if "://" in ref:
        _fail("must be an opaque id, not a URL", path)
    return ref


def _label(value: Any, expected: str | None, path: _Path) -> None:
    if expected is None:
        _text(value, path, MAX_REF_LENGTH)
        return
    if _string(value, path) != expected:
        _fail(f"expected {expected!r}, got {value!r}", path)


def _timestamp(value: Any, path: _Path) -> datetime:
    text = _string(value, path)
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        _fail(
            f"expected an RFC 3339 timestamp with a time zone (like "
            f"'2026-04-14T19:00:00Z'), got {text!r}",
            path,
        )
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction, zone = match.group(7), match.group(8)
    if zone == "Z":
        offset = timedelta(0)
    else:
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            _fail(f"time zone offset {zone!r} is out of range", path)
        offset = timedelta(hours=hours, minutes=minutes) * (-1 if zone[0] == "-" else 1)
    micro = int((fraction[1:] + "000000")[:6]) if fraction else 0
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=timezone(offset))
    except ValueError as exc:
        _fail(f"not a real date and time ({exc}): {text!r}", path)


def _message(value: Any, path: _Path, seen: set[str]) -> None:
    if not isinstance(value, dict):
        _fail(f"a message must be an object, got {kind_of(value)}", path)
    for key in value:
        if key not in MESSAGE_FIELDS:
            _fail(
                f"unexpected field {key!r}: a v1 message has only id, role, text content "
                "and an optional name",
                [*path, str(key)],
            )
    for key in ("id", "role", "content"):
        if key not in value:
            _fail(f"missing required field {key!r}", [*path, key])
    mid = _identifier(value["id"], [*path, "id"], MAX_MESSAGE_ID_LENGTH)
    if mid in seen:
        _fail(f"duplicate message id {mid!r}", [*path, "id"])
    seen.add(mid)
    role = _string(value["role"], [*path, "role"])
    if role not in MESSAGE_ROLES:
        _fail(f"role must be one of {', '.join(MESSAGE_ROLES)}, got {role!r}", [*path, "role"])
    content = value["content"]
    if isinstance(content, list):
        _fail("expected text content (a string), got an array of content parts", [*path, "content"])
    _text(content, [*path, "content"], MAX_CONTENT_LENGTH)
    if "name" in value:
        _text(value["name"], [*path, "name"], MAX_NAME_LENGTH)


def validate_artifact(
    obj: Any, *, framework: str | None = FRAMEWORK, surface: str | None = SURFACE
) -> None:
    """Check that ``obj`` is exactly a v1 compacted-message-snapshot artifact.

    Args:
        obj: the decoded JSON (a dict).
        framework / surface: the labels to require; ``None`` accepts any non-empty label.

    Raises:
        ArtifactError: naming the JSON path of the first problem and the reason.
    """
    if not isinstance(obj, dict):
        _fail(f"an artifact must be a JSON object, got {kind_of(obj)}", [])
    for key in obj:
        if key not in _ALL_FIELDS:
            _fail(
                f"unexpected field {key!r}: v1 has only "
                f"{', '.join(REQUIRED_FIELDS + OPTIONAL_FIELDS)} (no other event families, "
                "state or extra data)",
                [str(key)],
            )
    for key in REQUIRED_FIELDS:
        if key not in obj:
            _fail(f"missing required field {key!r}", [key])
    if _string(obj["schema"], ["schema"]) != SCHEMA:
        _fail(f"expected {SCHEMA!r}, got {obj['schema']!r}", ["schema"])
    _label(obj["framework"], framework, ["framework"])
    _label(obj["surface"], surface, ["surface"])
    _ref(obj["thread_id_ref"], ["thread_id_ref"])
    _ref(obj["run_id_ref"], ["run_id_ref"])
    started = _timestamp(obj["started_at"], ["started_at"])

    messages = obj["messages"]
    if not isinstance(messages, list):
        _fail(f"expected an array of messages, got {kind_of(messages)}", ["messages"])
    if not messages:
        _fail("must hold at least one message", ["messages"])
    seen: set[str] = set()
    for i, message in enumerate(messages):
        _message(message, ["messages", i], seen)

    terminal = _string(obj["terminal_event"], ["terminal_event"])
    if terminal not in TERMINAL_EVENTS:
        _fail(f"expected 'RUN_FINISHED' or 'RUN_ERROR', got {terminal!r}", ["terminal_event"])
    if "finished_at" in obj:
        finished = _timestamp(obj["finished_at"], ["finished_at"])
        if finished < started:
            _fail(f"must not be earlier than started_at ({obj['started_at']})", ["finished_at"])
    if "parent_run_id_ref" in obj:
        _ref(obj["parent_run_id_ref"], ["parent_run_id_ref"])
    if terminal != "RUN_ERROR":
        for key in ("error_code", "error_message"):
            if key in obj:
                _fail(f"only allowed when terminal_event is 'RUN_ERROR', not {terminal!r}", [key])
        return
    if "error_message" not in obj:
        _fail("required when terminal_event is 'RUN_ERROR'", ["error_message"])
    _text(obj["error_message"], ["error_message"], MAX_ERROR_MESSAGE_LENGTH)
    if "error_code" in obj:
        _text(obj["error_code"], ["error_code"], MAX_ERROR_CODE_LENGTH)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ArtifactError(f"duplicate JSON key {key!r}")
        out[key] = value
    return out


def _no_constant(name: str) -> NoReturn:
    raise ArtifactError(f"{name} is not JSON")


def load_artifact(
    source: str | bytes | os.PathLike[str] | IO[str] | IO[bytes],
    *,
    framework: str | None = FRAMEWORK,
    surface: str | None = SURFACE,
) -> dict[str, Any]:
    """Parse and validate an artifact: the whole of it, or nothing.

    Args:
        source: JSON text (a ``str`` whose first non-blank character is ``{``, ``[`` or
            ``"``), UTF-8 bytes, a path (``os.PathLike``, or any other ``str``), or an open
            file.
        framework / surface: as for :func:`validate_artifact`.

    Returns:
        The artifact, only when it is valid.

    Raises:
        ArtifactError: malformed JSON, JSON nested too deeply to decode, duplicate keys,
            ``NaN``, bytes that are not UTF-8, or anything :func:`validate_artifact` rejects.
        OSError: the file cannot be read.
    """
    data: str | bytes
    if isinstance(source, bytes):
        data = source
    elif isinstance(source, str):
        stripped = source.lstrip()
        if not stripped or stripped[0] in '{["':
            data = source
        else:
            with open(source, "rb") as fh:
                data = fh.read()
    elif isinstance(source, os.PathLike):
        with open(source, "rb") as fh:
            data = fh.read()
    elif callable(getattr(source, "read", None)):
        data = source.read()
    else:
        raise ArtifactError(
            f"load_artifact reads JSON text, bytes, a path or an open file, not "
            f"{type(source).__name__} (validate_artifact checks a decoded dict)"
        )
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ArtifactError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if data.startswith("\ufeff"):
        data = data[1:]  # a byte-order mark is not part of the JSON text (RFC 8259 §8.1)
    try:
        obj = json.loads(data, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ArtifactError(f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    except RecursionError:  # deeper than Python's stack; an artifact is three levels deep
        raise ArtifactError("not JSON: nested too deeply to decode") from None
    validate_artifact(obj, framework=framework, surface=surface)
    assert isinstance(obj, dict)
    return obj


def dumps_artifact(artifact: dict[str, Any]) -> str:
    """The artifact as readable JSON text (two-space indent, UTF-8 kept, final newline)."""
    return json.dumps(artifact, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def _rfc3339(moment: datetime) -> str:
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + f".{utc.microsecond // 1000:03d}Z"


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def _fits(check: Callable[[Any, _Path], object], value: Any) -> bool:
    try:
        check(value, [])
    except ArtifactError:
        return False
    return True


def _export_messages(view: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[Any] = set()
    for message in view:
        if message.get("role") not in MESSAGE_ROLES:
            continue  # reasoning, activity, a newer protocol's role
        text = _message_text(message.get("content"))
        if not text.strip():
            continue  # tool calls only, media only, empty
        mid = message.get("id")
        key = mid if isinstance(mid, str) else repr(mid)
        if key in seen:
            continue  # the first message with an id is the one the client finds
        seen.add(key)
        item: dict[str, Any] = {
            "id": mid,
            "role": message["role"],
            "content": truncate_text(text, MAX_CONTENT_LENGTH),
        }
        name = message.get("name")
        if _fits(lambda v, p: _text(v, p, MAX_NAME_LENGTH), name):
            item["name"] = name
        out.append(item)
    return out


def export_artifact(
    checkout: Checkout,
    *,
    terminal: dict[str, Any] | None = None,
    framework: str = FRAMEWORK,
    surface: str = SURFACE,
) -> dict[str, Any]:
    """The v1 artifact of a restored run (see the module docstring for every rule).

    Args:
        checkout: the run, restored (``Store.checkout``).
        terminal: the run's last terminal event (``RUN_FINISHED``/``RUN_ERROR``), the source
            of ``error_message``/``error_code``; :func:`export_run` finds it for you.
        framework / surface: the labels to write (defaults: the reference reader's).

    Returns:
        A dict that :func:`validate_artifact` accepts (with the same labels).

    Raises:
        ArtifactError: the run is incomplete, holds no text message, or has an id the
            contract cannot carry.
        ArgumentTypeError: ``checkout`` is no :class:`Checkout` (a ``TypeError`` too).
    """
    if not isinstance(checkout, Checkout):
        raise ArgumentTypeError(
            "export_artifact takes a Checkout (Store.checkout of the run), not "
            f"{a_kind(checkout)}"
        )
    run = checkout.run
    where = f"run {run.run_id!r} of thread {run.thread_id!r}"
    kind = _STATUS_TERMINAL.get(run.status)
    if kind is None:
        raise ArtifactError(
            f"{where} is {run.status} (no RUN_FINISHED or RUN_ERROR was recorded): an "
            "artifact needs the event that closed the run; export it once the run has ended",
            path="$.terminal_event",
        )
    artifact: dict[str, Any] = {
        "schema": SCHEMA,
        "framework": framework,
        "surface": surface,
        "thread_id_ref": run.thread_id,
        "run_id_ref": run.run_id,
        "started_at": _rfc3339(run.created_at),
        "messages": _export_messages(checkout.messages),
        "terminal_event": kind,
    }
    if not artifact["messages"]:
        raise ArtifactError(
            f"{where} has no text message to export (tool calls, media, reasoning and "
            "activity are not part of v1, and the artifact needs at least one message)",
            path="$.messages",
        )
    if run.updated_at is not None and run.updated_at >= run.created_at:
        artifact["finished_at"] = _rfc3339(run.updated_at)
    if run.parent_run_id is not None and _fits(_ref, run.parent_run_id):
        artifact["parent_run_id_ref"] = run.parent_run_id
    if kind == "RUN_ERROR":
        event = terminal if terminal is not None and terminal.get("type") == "RUN_ERROR" else {}
        message, code = event.get("message"), event.get("code")
        if isinstance(code, str) and code.strip():
            artifact["error_code"] = truncate_text(code, MAX_ERROR_CODE_LENGTH)
        if not (isinstance(message, str) and message.strip()):
            message = UNKNOWN_ERROR_MESSAGE
        artifact["error_message"] = truncate_text(message, MAX_ERROR_MESSAGE_LENGTH)
    try:
        validate_artifact(artifact, framework=framework, surface=surface)
    except ArtifactError as exc:
        raise ArtifactError(f"{where} cannot be exported: {exc.reason}", path=exc.path) from exc
    return artifact


def export_run(
    store: Store,
    run_or_ref: str,
    *,
    thread_id: str | None = None,
    framework: str = FRAMEWORK,
    surface: str = SURFACE,
) -> dict[str, Any]:
    """The v1 artifact of a stored run: checkout, find its last terminal event, export.

    A module-level function over the public ``Store`` API (``checkout`` and ``events``),
    so the store itself does not need to know the artifact.

    Raises:
        RunNotFoundError / AmbiguousRunError: as ``Store.checkout``.
        ArtifactError: as :func:`export_artifact`.
    """
    checkout = store.checkout(run_or_ref, thread_id=thread_id)
    run = checkout.run
    terminal = None
    for event in reversed(store.events(run.run_id, thread_id=run.thread_id)):
        if event.get("type") in TERMINAL_EVENTS:
            terminal = event
            break
    return export_artifact(checkout, terminal=terminal, framework=framework, surface=surface)
