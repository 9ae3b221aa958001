"""Sample data for the import service: a folder of mixed CSV, JSON and Markdown files, some deliberately broken.

    python examples/generate_data.py FOLDER [--files 3000] [--seed 42] [--broken 0.04]

The same seed gives the same files, byte for byte. Beside the files, FOLDER/.manifest.json (hidden, so the
importer skips it) says what each file should become: its format and record count, or the kind of error the
import host should report for it (the `kind` of the host's per-file errors), and a `marker` word found only in
that file's first record, for searching. Tests check imports against it.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import pathlib
import random
import shutil
import sys

MANIFEST = ".manifest.json"

FIRST_NAMES = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim", "Margaret",
               "Linus", "Guido", "Brendan", "Anders", "Chris", "Joan", "Niklaus", "Hedy", "John"]
CITIES = ["Lisbon", "Oslo", "Kyoto", "Quito", "Dakar", "Perth", "Tallinn", "Montreal", "Porto", "Valparaiso",
          "Reykjavik", "Hanoi", "Nairobi", "Bergen", "Cusco"]
WORDS = ("harbor lighthouse espresso invoice ledger parcel courier voyage compass lantern orchard meadow "
         "granite willow copper anchor ferry tide beacon market spice silk cedar marble quarry glacier canyon "
         "summit valley river delta pepper saffron olive walnut maple birch heron falcon otter badger").split()
PRODUCTS = ["kettle", "lamp", "notebook", "backpack", "teapot", "compass", "blanket", "umbrella", "bicycle", "lantern"]
ADJECTIVES = ["sturdy", "vintage", "compact", "bright", "quiet", "rugged", "elegant", "handmade", "foldable"]

# Shares of each kind of file; broken files take `--broken` of the total on top of this mix.
GOOD_KINDS = [("customers", 0.25), ("orders", 0.20), ("products", 0.20), ("events", 0.15), ("notes", 0.20)]
BROKEN_KINDS = ["csv_bad_row", "csv_open_quote", "json_truncated", "json_missing_comma", "binary_csv",
                "binary_json", "markdown_open_front_matter", "unsupported"]


class Generator:
    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def sentence(self, words: int) -> str:
        return " ".join(self.random.choice(WORDS) for _ in range(words)).capitalize() + "."

    def csv_text(self, header: list[str], rows: list[list[object]]) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator=self.random.choice(["\n", "\n", "\r\n"]))
        writer.writerow(header)
        writer.writerows(rows)
        return buffer.getvalue()

    def note(self) -> str:
        note = self.sentence(self.random.randint(3, 9))
        roll = self.random.random()
        if roll < 0.15:
            note = note.replace(" ", ", ", 1)  # a comma: the field gets quoted
        elif roll < 0.22:
            note = f'{note} "fragile"'  # quotes inside: doubled in the file
        elif roll < 0.27:
            note = note.replace(" ", "\n", 1)  # a newline inside a quoted field
        return note

    def customers(self, marker: str) -> tuple[str, int]:
        count = self.random.randint(10, 60)
        rows = [[1000 + i, f"{self.random.choice(FIRST_NAMES)} {self.random.choice(WORDS).capitalize()}",
                 self.random.choice(CITIES), f"{self.random.uniform(10, 5000):.2f}",
                 self.note() + (f" {marker}" if i == 0 else "")] for i in range(count)]
        return self.csv_text(["id", "name", "city", "balance", "note"], rows), count

    def orders(self, marker: str) -> tuple[str, int]:
        count = self.random.randint(10, 60)
        rows = [[f"ORD-{self.random.randint(10000, 99999)}", f"{self.random.choice(ADJECTIVES)} {self.random.choice(PRODUCTS)}",
                 self.random.randint(1, 9), self.random.choice(CITIES),
                 self.note() + (f" {marker}" if i == 0 else "")] for i in range(count)]
        return self.csv_text(["order", "title", "quantity", "ship_to", "comment"], rows), count

    def product(self, index: int, marker: str | None) -> dict[str, object]:
        product = {
            "id": index,
            "name": f"{self.random.choice(ADJECTIVES)} {self.random.choice(PRODUCTS)}",
            "price": round(self.random.uniform(3, 400), 2),
            "tags": self.random.sample(WORDS, 3),
            "description": self.sentence(self.random.randint(6, 16)),
            "stock": {"warehouse": self.random.choice(CITIES), "count": self.random.randint(0, 500)},
            "discontinued": self.random.random() < 0.1,
        }
        if marker:
            product["description"] += f" {marker}"
        return product

    def products(self, marker: str) -> tuple[str, int]:
        count = self.random.randint(5, 40)
        items = [self.product(i, marker if i == 0 else None) for i in range(count)]
        return json.dumps(items, indent=self.random.choice([None, 2]), ensure_ascii=False) + "\n", count

    def events(self, marker: str) -> tuple[str, int]:
        event = {"title": f"{self.random.choice(WORDS).capitalize()} festival in {self.random.choice(CITIES)}",
                 "day": f"2025-{self.random.randint(1, 12):02}-{self.random.randint(1, 28):02}",
                 "summary": f"{self.sentence(12)} {marker}", "visitors": self.random.randint(50, 90000)}
        return json.dumps(event, indent=2) + "\n", 1

    def notes(self, marker: str) -> tuple[str, int]:
        sections = self.random.randint(1, 6)
        tags = ", ".join(self.random.sample(WORDS, 2))
        lines = ["---", f"title: Notes on the {self.random.choice(WORDS)}",
                 f"author: {self.random.choice(FIRST_NAMES)}", f"tags: [{tags}]", "---", "",
                 f"{self.sentence(10)} {marker} See [the map](https://example.org/{self.random.choice(WORDS)}).", ""]
        for number in range(sections):
            lines += [f"{'#' * self.random.randint(1, 3)} {self.random.choice(WORDS).capitalize()} {number + 1}", "",
                      self.sentence(self.random.randint(8, 20)), ""]
            if self.random.random() < 0.2:
                lines += ["```", "# a comment in code, not a heading", "```", ""]
        return "\n".join(lines), sections + 1  # the intro is a record too

    def broken(self, kind: str) -> tuple[str, bytes, str]:
        """A broken file: its name suffix, its bytes, and the error kind the host should report."""
        if kind == "csv_bad_row":
            text, count = self.customers("")
            lines = text.splitlines(keepends=True)
            lines.insert(self.random.randint(2, len(lines)), "999,too,many,fields,in,this,row\n")
            return ".csv", "".join(lines).encode(), "csv"
        if kind == "csv_open_quote":
            text, _ = self.orders("")
            return ".csv", (text + 'ORD-1,"a quote that never closes,1,Oslo,x\n').encode(), "csv"
        if kind == "json_truncated":
            text, _ = self.products("")
            return ".json", text[: len(text) // 2].encode(), "json"
        if kind == "json_missing_comma":
            return ".json", b'{"title": "almost JSON"\n "tags": ["a", "b"]}\n', "json"
        if kind in ("binary_csv", "binary_json"):
            junk = bytes(self.random.getrandbits(8) for _ in range(self.random.randint(200, 4000)))
            return (".csv" if kind == "binary_csv" else ".json"), b"\x00" + junk, "binary"
        if kind == "markdown_open_front_matter":
            return ".md", b"---\ntitle: the front-matter never ends\nauthor: nobody\n\n# Heading\ntext\n", "markdown"
        if kind == "unsupported":
            return ".xlsx", b"PK\x03\x04" + bytes(self.random.getrandbits(8) for _ in range(300)), "unsupported"
        raise ValueError(kind)


def generate(folder: pathlib.Path, files: int, seed: int, broken_share: float) -> dict[str, object]:
    if folder.exists():
        if not (folder / MANIFEST).exists() and any(folder.iterdir()):
            raise SystemExit(f"{folder} exists and was not made by this generator; not touching it")
        shutil.rmtree(folder)
    generator = Generator(seed)
    broken_count = round(files * broken_share)
    kinds = [kind for kind, share in GOOD_KINDS for _ in range(round((files - broken_count) * share))]
    kinds = (kinds + [GOOD_KINDS[0][0]] * files)[: files - broken_count]
    kinds += [BROKEN_KINDS[i % len(BROKEN_KINDS)] for i in range(broken_count)]
    generator.random.shuffle(kinds)

    entries: dict[str, dict[str, object]] = {}
    for index, kind in enumerate(kinds):
        marker = f"mark{seed}x{index:05d}"
        if kind in BROKEN_KINDS:
            suffix, content, error = generator.broken(kind)
            name = f"inbox/{index:05d}-{kind.replace('_', '-')}{suffix}"
            entry: dict[str, object] = {"format": suffix.lstrip("."), "error": error}
        else:
            text, records = getattr(generator, kind)(marker)
            suffix = {"customers": ".csv", "orders": ".csv", "products": ".json", "events": ".json", "notes": ".md"}[kind]
            name = f"{kind}/{index:05d}-{kind}{suffix}"
            content = text.encode()
            entry = {"format": {".csv": "csv", ".json": "json", ".md": "markdown"}[suffix], "records": records,
                     "marker": marker}
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        entry["bytes"] = len(content)
        entries[name] = entry

    good = [entry for entry in entries.values() if "records" in entry]
    manifest = {
        "seed": seed,
        "files": entries,
        "totals": {
            "files": len(entries),
            "good": len(good),
            "broken": len(entries) - len(good),
            "records": sum(int(entry["records"]) for entry in good),
            "markdown": sum(1 for entry in good if entry["format"] == "markdown"),
        },
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=pathlib.Path)
    parser.add_argument("--files", type=int, default=3000, help="how many files (default 3000)")
    parser.add_argument("--seed", type=int, default=42, help="the same seed gives the same files (default 42)")
    parser.add_argument("--broken", type=float, default=0.04, help="share of broken files (default 0.04)")
    args = parser.parse_args(argv)
    if args.files < 1 or not 0 <= args.broken <= 1:
        parser.error("--files must be positive and --broken between 0 and 1")
    totals = generate(args.folder, args.files, args.seed, args.broken)["totals"]
    print(f"generated {totals['files']} files in {args.folder} ({totals['good']} good with {totals['records']} records, "
          f"{totals['markdown']} of them Markdown; {totals['broken']} broken) from seed {args.seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
