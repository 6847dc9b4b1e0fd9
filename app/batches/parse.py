"""Reading a batch: pasted addresses, a CSV or an ``.xlsx`` sheet, into numbered rows.

Every reader streams and stops at the first bound it crosses (``Bounds``): rows, columns, the
characters of one cell and of the whole input, and the time spent; an ``.xlsx`` is refused by
its zip's declared sizes before it is opened. Crossing a bound raises ``OverBound`` with a pt-BR
message naming the bound and the row; a file that cannot be opened at all raises
``UnreadableBatch``. These functions are plain and blocking: the web reads through
``app.batches.isolation``, in a child process, never on the event loop.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from app import clock
from app.config import Settings

#: Column headings that mean the address and the name (compared without case or accents).
EMAIL_HEADINGS = frozenset({"email", "e-mail", "e_mail", "endereco", "endereço"})
NAME_HEADINGS = frozenset({"nome", "name"})
_NAME_AND_ADDRESS = re.compile(r"^(?P<name>.*?)\s*<(?P<email>[^<>]*)>$", re.DOTALL)

MIB = 1024 * 1024


@dataclass(frozen=True)
class Bounds:
    """How much one batch may make us read. Each is checked before the work it bounds, or as
    the reading goes, so crossing one stops the reading there."""

    rows: int  # BATCH_MAX_ROWS: rows (entries of a pasted list) after the heading
    file_bytes: int  # BATCH_MAX_BYTES: the upload as sent
    #: An .xlsx is a zip: what its members may unpack to (1,000 rows of a wide sheet need a
    #: few MiB), and how much larger than packed (real sheets: well under 30 times).
    unpacked_bytes: int = 8 * MIB
    unpacked_ratio: int = 100
    columns: int = 100
    cell_chars: int = 5_000  # one cell, one shared string, one pasted entry
    total_chars: int = 1_000_000
    seconds: float = 10.0
    #: The reading process's heap (``RLIMIT_DATA``, which includes what the interpreter and
    #: openpyxl take at start, about 100 MiB); a 1,000-row sheet needs a few MiB beyond it.
    memory_bytes: int = 320 * MIB

    @classmethod
    def of(cls, settings: Settings) -> Bounds:
        return cls(rows=settings.batch_max_rows, file_bytes=settings.batch_max_bytes)


@dataclass(frozen=True)
class Row:
    """One address as the person gave it, and where it came from (1-based line or sheet row)."""

    line: int
    email: str
    name: str | None = None


class UnreadableBatch(ValueError):
    """The whole input cannot be read (not a CSV, a broken .xlsx, no e-mail column);
    ``str()`` is the pt-BR message for the person, ``detail`` what went wrong inside (an
    exception's name) for the log, never for the page."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class OverBound(ValueError):
    """The input crosses one of ``Bounds``; ``str()`` is the pt-BR message for the person,
    ``status`` the HTTP status (413 for bytes, 422 for the rest)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class TooManyRows(OverBound):
    """More rows than ``Bounds.rows``: ``line`` is where the first one too many is."""

    def __init__(self, limit: int, line: int, what: str = "A lista", unit: str = "endereços"):
        super().__init__(
            f"{what} passa de {_n(limit)} {unit} (linha {_n(line)}). O máximo é {_n(limit)} "
            "por lote: divida em lotes menores."
        )
        self.limit = limit
        self.line = line


def _n(number: float) -> str:
    """A number as pt-BR writes it: 5.001."""
    return f"{number:,}".replace(",", ".")


class _Reading:
    """The running count of one input against its bounds; ``what`` is how the message names
    it ("A lista", "A planilha")."""

    def __init__(self, bounds: Bounds, what: str) -> None:
        self.bounds, self.what = bounds, what
        self.deadline = clock.monotonic() + bounds.seconds
        self.chars = 0
        # Empty cells cost too (",,,," or a sheet padded to the width its header claims):
        # every row may be as wide as the column bound, no wider on the whole.
        self.cells_left = (bounds.rows + 1) * (bounds.columns + 1)

    def clock(self, line: int) -> None:
        if clock.monotonic() > self.deadline:
            raise OverBound(
                f"{self.what} levou mais de {_n(self.bounds.seconds)} segundos para ser lida "
                f"(parou na linha {_n(line)}). Envie um arquivo menor, só com email e nome."
            )

    def count(self, line: int, chars: int) -> None:
        self.chars += chars
        if self.chars > self.bounds.total_chars:
            raise OverBound(
                f"{self.what} passa de {_n(self.bounds.total_chars)} caracteres "
                f"(linha {_n(line)}). Divida em lotes menores."
            )

    def too_long(self, line: int) -> OverBound:
        return OverBound(
            f"A linha {_n(line)} tem um valor com mais de {_n(self.bounds.cell_chars)} "
            "caracteres. Confira essa linha e envie de novo."
        )

    def cell(self, line: int, value: str) -> str:
        if len(value) > self.bounds.cell_chars:
            raise self.too_long(line)
        return value

    def cells(self, line: int, cells: Sequence[object]) -> list[str]:
        """One table row as text, after checking its columns and cells; also the clock."""
        self.clock(line)
        self.cells_left -= len(cells)
        if self.cells_left < 0:
            raise OverBound(
                f"{self.what} passa de {_n((self.bounds.rows + 1) * (self.bounds.columns + 1))} "
                f"células, contando as vazias (linha {_n(line)}). Envie só as colunas email e "
                "nome."
            )
        if len(cells) > self.bounds.columns and any(
            c not in (None, "") for c in cells[self.bounds.columns :]
        ):
            raise OverBound(
                f"{self.what} passa de {_n(self.bounds.columns)} colunas (linha {_n(line)}). "
                "Envie só as colunas email e nome."
            )
        text = [self.cell(line, "" if c is None else str(c)) for c in cells[: self.bounds.columns]]
        self.count(line, sum(map(len, text)))
        return text


def _split_outside_quotes(line: int, text: str, reading: _Reading) -> Iterator[str]:
    """Split on commas and semicolons, but not inside "quotes" or <angle brackets>; an entry
    longer than a cell may be is refused as soon as it is."""
    quoted = bracketed = False
    start = 0
    longest = reading.bounds.cell_chars
    for index, char in enumerate(text):
        if char == '"' and not bracketed:
            quoted = not quoted
        elif char == "<" and not quoted:
            bracketed = True
        elif char == ">" and not quoted:
            bracketed = False
        elif char in ",;" and not quoted and not bracketed:
            yield text[start:index]
            start = index + 1
        elif index - start >= longest:
            reading.cell(line, text[start : index + 1])
    yield text[start:]


def _entry(line: int, text: str) -> Row:
    """``ana@x.com``, ``Ana Souza <ana@x.com>`` or ``"Souza, Ana" <ana@x.com>``."""
    found = _NAME_AND_ADDRESS.match(text)
    if found is None:
        return Row(line, text.strip().strip('"').strip())
    name = found.group("name").strip().strip('"').strip()
    return Row(line, found.group("email").strip(), name or None)


#: What ``str.splitlines`` splits on, matched one line at a time.
_BREAKS = r"\n\r\v\f\x1c-\x1e\x85\u2028\u2029"
_LINE = re.compile(rf"([^{_BREAKS}]*)(?:\r\n|[{_BREAKS}]|\Z)")


def _lines(text: str) -> Iterator[str]:
    """``text.splitlines()``, lazily: a huge paste is never split past where reading stops."""
    for found in _LINE.finditer(text):
        if not found.group(0):
            return
        yield found.group(1)


def _first_line(text: str) -> str:
    return next(_lines(text), "")


def parse_pasted(text: str, bounds: Bounds) -> list[Row]:
    """Addresses one per line, or separated by commas or semicolons; optionally ``Nome <email>``.

    Blank entries (a trailing comma, an empty line) are not rows. Lines are split one at a
    time, and the reading stops at the first entry past ``bounds.rows``.
    """
    reading = _Reading(bounds, "A lista")
    rows: list[Row] = []
    for number, line in enumerate(_lines(text), start=1):
        reading.clock(number)
        reading.count(number, len(line))
        for part in _split_outside_quotes(number, line, reading):
            if part.strip():
                if len(rows) == bounds.rows:
                    raise TooManyRows(bounds.rows, number)
                rows.append(_entry(number, reading.cell(number, part)))
    return rows


def _fold(heading: object) -> str:
    return str(heading or "").strip().lower().replace("ê", "e").replace("ç", "c")


def _columns(header: list[str]) -> tuple[int, int | None]:
    folded = [_fold(cell) for cell in header]
    emails = [i for i, cell in enumerate(folded) if cell in {_fold(h) for h in EMAIL_HEADINGS}]
    if not emails:
        raise UnreadableBatch(
            "A planilha precisa de uma coluna chamada “email” na primeira linha "
            "(e, se quiser, uma coluna “nome”)."
        )
    names = [i for i, cell in enumerate(folded) if cell in NAME_HEADINGS]
    return emails[0], (names[0] if names else None)


def _cell(cells: list[str], index: int | None) -> str:
    if index is None or index >= len(cells):
        return ""
    return cells[index].strip()


def _table(numbered: Iterator[tuple[int, list[str]]], bounds: Bounds) -> list[Row]:
    """Rows from a table: the heading row names the columns; blank lines are not rows."""
    first = next(numbered, None)
    if first is None or not any(cell.strip() for cell in first[1]):
        raise UnreadableBatch("A planilha está vazia: a primeira linha deve ter a coluna “email”.")
    email_at, name_at = _columns(first[1])
    rows: list[Row] = []
    for line, cells in numbered:
        if not any(cell.strip() for cell in cells):
            continue  # a blank line of the sheet is not a row
        if len(rows) == bounds.rows:
            raise TooManyRows(bounds.rows, line, "A planilha", "linhas")
        rows.append(Row(line, _cell(cells, email_at), _cell(cells, name_at) or None))
    return rows


def _decode(data: bytes) -> str:
    """UTF-8 (with or without BOM), else Windows-1252 (a spreadsheet saved "CSV" in pt-BR)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        raise UnreadableBatch(
            "Não conseguimos ler o arquivo como texto. Salve a planilha como CSV (UTF-8) "
            "ou .xlsx e envie de novo."
        ) from None


def _delimiter(header_line: str) -> str:
    counts = {sep: header_line.count(sep) for sep in (";", ",", "\t")}
    best = max(counts, key=lambda sep: counts[sep])
    return best if counts[best] else ","


def parse_csv(data: bytes, bounds: Bounds) -> list[Row]:
    """A CSV with an ``email`` column and an optional ``nome``; ``,`` ``;`` or tab separated."""
    if b"\x00" in data:
        raise UnreadableBatch(
            "Este arquivo não parece um CSV (tem bytes binários). Envie um .csv ou um .xlsx."
        )
    text = _decode(data)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(_first_line(text)))
    reading = _Reading(bounds, "A planilha")

    def numbered() -> Iterator[tuple[int, list[str]]]:
        while True:
            line = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error:
                # The csv module refuses only a field over its own limit (128 KiB), far past
                # ours: that line has a cell too long.
                raise reading.too_long(line) from None
            yield line, reading.cells(line, cells)

    return _table(numbered(), bounds)


def _refuse_zip_bombs(data: bytes, bounds: Bounds) -> None:
    """Refuse an .xlsx by what its zip says its members unpack to, before opening any. The
    declared sizes are binding: ``zipfile`` stops each member there and fails its CRC check
    if the data would go on."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile:
        return  # openpyxl says it is not a workbook, in its own words
    unpacked = sum(item.file_size for item in members)
    packed = max(1, sum(item.compress_size for item in members))
    if unpacked > bounds.unpacked_bytes:
        raise OverBound(
            f"Esta planilha .xlsx passa de {_n(bounds.unpacked_bytes // MIB)} MiB depois de "
            "descompactada. Envie só as colunas email e nome, ou um CSV.",
            413,
        )
    if unpacked > MIB and unpacked > bounds.unpacked_ratio * packed:
        raise OverBound(
            f"Esta planilha .xlsx cresce mais de {_n(bounds.unpacked_ratio)} vezes ao ser "
            "descompactada, o que uma planilha comum não faz. Salve de novo ou envie um CSV.",
            413,
        )


def parse_xlsx(data: bytes, bounds: Bounds) -> list[Row]:
    """The first sheet of an ``.xlsx`` workbook: a heading row with ``email`` (and ``nome``).

    Read-only mode streams the sheet row by row; ``max_col`` keeps a ``<dimension>`` that
    claims thousands of columns from padding every row to that width.
    """
    from openpyxl import load_workbook  # imported here: only uploads of .xlsx pay for it

    _refuse_zip_bombs(data, bounds)
    reading = _Reading(bounds, "A planilha")
    try:
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except MemoryError:
        raise
    except Exception as exc:  # openpyxl raises many kinds on a malformed workbook
        raise UnreadableBatch(
            "Não conseguimos abrir esta planilha .xlsx (o arquivo parece corrompido ou não é "
            "do Excel). Salve de novo ou envie como CSV.",
            type(exc).__name__,
        ) from None
    try:
        sheet = workbook.worksheets[0]
        rows = sheet.iter_rows(values_only=True, max_col=bounds.columns + 1)
        numbered = (
            (number, reading.cells(number, cells)) for number, cells in enumerate(rows, start=1)
        )
        return _table(numbered, bounds)
    except (UnreadableBatch, OverBound, MemoryError):
        raise
    except Exception as exc:
        raise UnreadableBatch(
            "Não conseguimos ler as linhas desta planilha .xlsx. Salve de novo ou envie como CSV.",
            type(exc).__name__,
        ) from None
    finally:
        workbook.close()


def parse_upload(filename: str, data: bytes, bounds: Bounds) -> list[Row]:
    """A file by its kind: ``.xlsx`` (or its zip signature), else CSV."""
    if len(data) > bounds.file_bytes:
        raise OverBound(
            f"O arquivo passa de {_n(bounds.file_bytes // 1024)} KiB. Envie só as colunas "
            "email e nome, ou divida em lotes.",
            413,
        )
    if filename.lower().endswith((".xlsx", ".xlsm")) or data[:4] == b"PK\x03\x04":
        return parse_xlsx(data, bounds)
    if filename.lower().endswith(".xls"):
        raise UnreadableBatch(
            "Arquivos .xls (Excel antigo) não são aceitos. Salve como .xlsx ou CSV."
        )
    return parse_csv(data, bounds)
