"""Reading a batch: pasted forms, CSV (BOM, ``;``, quoted names with commas) and .xlsx."""

from __future__ import annotations

import io

import pytest
from openpyxl import Workbook

from app.batches.parse import (
    Bounds,
    OverBound,
    Row,
    TooManyRows,
    UnreadableBatch,
    parse_csv,
    parse_pasted,
    parse_upload,
    parse_xlsx,
)

BOUNDS = Bounds(rows=1000, file_bytes=2 * 1024 * 1024)


def test_pasted_addresses_split_on_lines_commas_and_semicolons() -> None:
    text = "ana@exemplo.com\nbia@exemplo.com, caio@exemplo.com; davi@exemplo.com\n\n ,; \n"

    rows = parse_pasted(text, BOUNDS)

    assert [(r.line, r.email) for r in rows] == [
        (1, "ana@exemplo.com"),
        (2, "bia@exemplo.com"),
        (2, "caio@exemplo.com"),
        (2, "davi@exemplo.com"),
    ]


def test_pasted_names_in_angle_brackets_and_quoted_names_with_commas() -> None:
    rows = parse_pasted(
        'Ana Souza <ana@exemplo.com>, "Lima, Bia" <bia@exemplo.com>; <c@x.com>', BOUNDS
    )

    assert rows == [
        Row(1, "ana@exemplo.com", "Ana Souza"),
        Row(1, "bia@exemplo.com", "Lima, Bia"),
        Row(1, "c@x.com", None),
    ]


def test_a_csv_with_a_bom_and_semicolons_and_a_name_with_a_comma() -> None:
    data = '\ufeffNome;E-mail\n"Souza, Ana";ana@exemplo.com\nBia;bia@exemplo.com\n;;\n'.encode()

    rows = parse_csv(data, BOUNDS)

    assert rows == [Row(2, "ana@exemplo.com", "Souza, Ana"), Row(3, "bia@exemplo.com", "Bia")]


def test_a_csv_with_commas_and_only_an_email_column() -> None:
    rows = parse_csv(b"email\r\nana@exemplo.com\r\nbia@exemplo.com\r\n", BOUNDS)

    assert [r.email for r in rows] == ["ana@exemplo.com", "bia@exemplo.com"]
    assert all(r.name is None for r in rows)


def test_a_csv_saved_by_a_pt_br_spreadsheet_in_windows_1252_is_read() -> None:
    rows = parse_csv("nome;email\nJoão;joao@exemplo.com\n".encode("cp1252"), BOUNDS)

    assert rows == [Row(2, "joao@exemplo.com", "João")]


def test_a_csv_without_an_email_column_is_refused_with_a_clear_message() -> None:
    with pytest.raises(UnreadableBatch, match="coluna chamada “email”"):
        parse_csv(b"nome,telefone\nAna,123\n", BOUNDS)


def test_a_binary_file_is_not_a_csv() -> None:
    with pytest.raises(UnreadableBatch, match="não parece um CSV"):
        parse_upload("lista.csv", b"\x00\x01\x02garbage", BOUNDS)


def test_a_cell_over_the_csv_modules_own_limit_is_refused_naming_its_line() -> None:
    big = "x" * (200 * 1024)  # over the csv module's field size limit (and ours)
    data = f'email\nana@exemplo.com\n"{big}"\nbia@exemplo.com\n'.encode()

    with pytest.raises(OverBound, match=r"A linha 3 tem um valor com mais de 5\.000 caracteres"):
        parse_csv(data, BOUNDS)


def _xlsx(*rows: tuple[object, ...]) -> bytes:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    for row in rows:
        sheet.append(list(row))
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_an_xlsx_sheet_with_email_and_nome_columns() -> None:
    data = _xlsx(("Nome", "Email"), ("Souza, Ana", "ana@exemplo.com"), (None, None), (None, 42))

    rows = parse_upload("lista.xlsx", data, BOUNDS)

    assert rows == [Row(2, "ana@exemplo.com", "Souza, Ana"), Row(4, "42", None)]


def test_an_unreadable_xlsx_is_refused_with_a_clear_message() -> None:
    with pytest.raises(UnreadableBatch, match="Não conseguimos abrir esta planilha"):
        parse_xlsx(b"PK\x03\x04 this is not really a zip", BOUNDS)


def test_more_rows_than_the_limit_are_refused_as_a_whole() -> None:
    text = "\n".join(f"p{i}@exemplo.com" for i in range(11))

    with pytest.raises(TooManyRows) as refused:
        parse_pasted(text, Bounds(rows=10, file_bytes=BOUNDS.file_bytes))

    assert (refused.value.line, refused.value.limit) == (11, 10)
    assert str(refused.value).startswith("A lista passa de 10 endereços (linha 11).")


def test_an_xlsx_that_unpacks_to_too_much_is_refused_before_it_is_opened() -> None:
    import io
    import zipfile

    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("xl/worksheets/sheet1.xml", b"0" * (65 * 1024 * 1024))
    assert len(packed.getvalue()) < 1024 * 1024  # small on the wire

    with pytest.raises(OverBound, match="passa de 8 MiB depois de descompactada") as refused:
        parse_xlsx(packed.getvalue(), BOUNDS)
    assert refused.value.status == 413
