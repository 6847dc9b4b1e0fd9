"""Reading a batch: pasted addresses, a CSV or an ``.xlsx`` sheet, into numbered rows.

Nothing is dropped in silence: a line or a sheet row that cannot be read becomes a row with
``problem`` set (counted and shown in the review), and a file that cannot be opened at all
raises ``UnreadableBatch`` with a pt-BR message for the person.
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: Column headings that mean the address and the name (compared without case or accents).
EMAIL_HEADINGS = frozenset({"email", "e-mail", "e_mail", "endereco", "endereço"})
NAME_HEADINGS = frozenset({"nome", "name"})
_NAME_AND_ADDRESS = re.compile(r"^(?P<name>.*?)\s*<(?P<email>[^<>]*)>$", re.DOTALL)


@dataclass(frozen=True)
class Row:
    """One address as the person gave it, and where it came from (1-based line or sheet row)."""

    line: int
    email: str
    name: str | None = None
    problem: str | None = None  # the row could not be read: why, in pt-BR


class UnreadableBatch(ValueError):
    """The whole input cannot be read (not a CSV, a broken .xlsx, no e-mail column)."""


class TooManyRows(ValueError):
    """More rows than ``BATCH_MAX_ROWS``."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"{count} > {limit}")
        self.count = count
        self.limit = limit


def _split_outside_quotes(line: str) -> Iterator[str]:
    """Split on commas and semicolons, but not inside "quotes" or <angle brackets>."""
    quoted = bracketed = False
    start = 0
    for index, char in enumerate(line):
        if char == '"' and not bracketed:
            quoted = not quoted
        elif char == "<" and not quoted:
            bracketed = True
        elif char == ">" and not quoted:
            bracketed = False
        elif char in ",;" and not quoted and not bracketed:
            yield line[start:index]
            start = index + 1
    yield line[start:]


def _entry(line: int, text: str) -> Row:
    """``ana@x.com``, ``Ana Souza <ana@x.com>`` or ``"Souza, Ana" <ana@x.com>``."""
    found = _NAME_AND_ADDRESS.match(text)
    if found is None:
        return Row(line, text.strip().strip('"').strip())
    name = found.group("name").strip().strip('"').strip()
    return Row(line, found.group("email").strip(), name or None)


def parse_pasted(text: str) -> list[Row]:
    """Addresses one per line, or separated by commas or semicolons; optionally ``Nome <email>``.

    Blank entries (a trailing comma, an empty line) are not rows.
    """
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        for part in _split_outside_quotes(line):
            if part.strip():
                rows.append(_entry(number, part))
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
    value = cells[index]
    return "" if value is None else str(value).strip()


def _table_rows(
    numbered: Iterable[tuple[int, list[str] | str]], email_at: int, name_at: int | None
) -> list[Row]:
    """Rows from a table's body: ``(line, cells)``, or ``(line, why)`` for an unreadable one."""
    rows = []
    for line, cells in numbered:
        if isinstance(cells, str):
            rows.append(Row(line, "", problem=cells))
            continue
        if not any(str(cell or "").strip() for cell in cells):
            continue  # a blank line of the sheet is not a row
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


def parse_csv(data: bytes, max_rows: int) -> list[Row]:
    """A CSV with an ``email`` column and an optional ``nome``; ``,`` ``;`` or tab separated."""
    if b"\x00" in data:
        raise UnreadableBatch(
            "Este arquivo não parece um CSV (tem bytes binários). Envie um .csv ou um .xlsx."
        )
    text = _decode(data)
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise UnreadableBatch("A planilha está vazia: a primeira linha deve ter a coluna “email”.")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(lines[0]))
    try:
        header = next(reader)
    except csv.Error as exc:
        raise UnreadableBatch(
            f"Não conseguimos ler a primeira linha da planilha ({exc})."
        ) from None
    email_at, name_at = _columns(header)

    def body() -> Iterator[tuple[int, list[str] | str]]:
        count = 0
        while True:
            line = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                yield line, f"Linha ilegível no CSV ({exc})."
                continue
            count += 1
            if count > max_rows + 1:  # enough to say "too many"; the rest is not read
                return
            yield line, cells

    return _table_rows(body(), email_at, name_at)


#: An .xlsx is a zip: what it may unpack to, whatever its size on the wire (a 2 MiB upload
#: of 1,000 rows unpacks to well under 10 MiB; a zip bomb to gigabytes).
MAX_XLSX_UNPACKED_BYTES = 64 * 1024 * 1024


def _refuse_zip_bombs(data: bytes) -> None:
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(item.file_size for item in archive.infolist())
    except zipfile.BadZipFile:
        return  # openpyxl says it is not a workbook, in its own words
    if unpacked > MAX_XLSX_UNPACKED_BYTES:
        raise UnreadableBatch(
            "Esta planilha .xlsx é grande demais depois de aberta. Envie só as colunas email e "
            "nome, ou um CSV."
        )


def parse_xlsx(data: bytes, max_rows: int) -> list[Row]:
    """The first sheet of an ``.xlsx`` workbook: a heading row with ``email`` (and ``nome``)."""
    from openpyxl import load_workbook  # imported here: only uploads of .xlsx pay for it

    _refuse_zip_bombs(data)
    try:
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, TypeError) as exc:
        raise UnreadableBatch(
            "Não conseguimos abrir esta planilha .xlsx (o arquivo parece corrompido ou não é "
            f"do Excel). Salve de novo ou envie como CSV. Detalhe: {type(exc).__name__}."
        ) from None
    except Exception as exc:  # openpyxl raises many kinds on a malformed workbook
        raise UnreadableBatch(
            "Não conseguimos abrir esta planilha .xlsx. Salve de novo ou envie como CSV. "
            f"Detalhe: {type(exc).__name__}."
        ) from None
    try:
        sheet = workbook.worksheets[0]
        rows = sheet.iter_rows(values_only=True, max_row=max_rows + 2)
        header = next(rows, None)
        if header is None:
            raise UnreadableBatch("A planilha está vazia: a primeira linha deve ter “email”.")
        email_at, name_at = _columns([str(c or "") for c in header])
        numbered = (
            (number, [("" if c is None else str(c)) for c in cells])
            for number, cells in enumerate(rows, start=2)
        )
        return _table_rows(numbered, email_at, name_at)
    except UnreadableBatch:
        raise
    except Exception as exc:
        raise UnreadableBatch(
            f"Não conseguimos ler as linhas desta planilha .xlsx ({type(exc).__name__})."
        ) from None
    finally:
        workbook.close()


def parse_upload(filename: str, data: bytes, max_rows: int) -> list[Row]:
    """A file by its kind: ``.xlsx`` (or its zip signature), else CSV."""
    if filename.lower().endswith((".xlsx", ".xlsm")) or data[:4] == b"PK\x03\x04":
        return parse_xlsx(data, max_rows)
    if filename.lower().endswith(".xls"):
        raise UnreadableBatch(
            "Arquivos .xls (Excel antigo) não são aceitos. Salve como .xlsx ou CSV."
        )
    return parse_csv(data, max_rows)


def check_size(rows: list[Row], max_rows: int) -> list[Row]:
    """The rows, or ``TooManyRows`` when there are more than ``max_rows``."""
    if len(rows) > max_rows:
        raise TooManyRows(len(rows), max_rows)
    return rows
