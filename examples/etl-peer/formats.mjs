// A file's bytes -> records: the ETL step the import host hands every file to. CSV and JSON here, Markdown in
// markdown.mjs. A record is {title, body, fields}: `title` names it, `body` is the text the full-text index sees,
// `fields` keeps the structure (stored as JSON).
//
// A broken file fails whole, with a FileError whose `kind` is the import host's per-file error kind (`binary`,
// `csv`, `json`, `markdown`), so a file lands in the catalogue whole or not at all.

import { parseMarkdown, MarkdownError } from './markdown.mjs';

/** Why a file is refused: `kind` is the import host's error kind, `message` says where (a line, an offset). */
export class FileError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'FileError';
    this.kind = kind;
  }
}

export const FORMATS = Object.freeze(['csv', 'json', 'markdown']);

/** Records reported between two progress messages (and between two turns of the event loop) on a long file. */
export const PROGRESS_EVERY = 1000;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The bytes as text, or why they are not: binary junk (a NUL byte, or not UTF-8) is refused. */
export function decodeText(bytes) {
  const nul = bytes.indexOf(0);
  if (nul !== -1) throw new FileError('binary', `binary content: a NUL byte at offset ${nul}`);
  try {
    return utf8.decode(bytes);
  } catch {
    throw new FileError('binary', 'binary content: not UTF-8 text');
  }
}

/**
 * Parses one file's bytes into records. On a long file, every `every` records it calls
 * `progress({records, bytesDone, bytesTotal})` and lets the event loop run (so the progress goes out, and the peer
 * keeps answering its host); `signal` stops it there. Throws a FileError for a broken file.
 */
export async function importFile({ file, format, bytes }, { progress = () => {}, every = PROGRESS_EVERY, signal } = {}) {
  const text = decodeText(bytes);
  const records = [];
  let counted = 0; // text[0..counted) is in bytesDone
  let bytesDone = 0;
  for (const { record, end } of parseText(format, text, file)) {
    records.push(record);
    if (records.length % every === 0) {
      bytesDone += Buffer.byteLength(text.slice(counted, end));
      counted = end;
      progress({ records: records.length, bytesDone, bytesTotal: bytes.length });
      await new Promise(setImmediate);
      signal?.throwIfAborted();
    }
  }
  return records;
}

/** Parses the records at once (tests, and callers without progress). */
export function parseRecords(format, text, file) {
  return Array.from(parseText(format, text, file), ({ record }) => record);
}

/** The records of a file's text in order, each with `end`: how much of the text it took (a CSV row's end). */
function* parseText(format, text, file) {
  switch (format) {
    case 'csv':
      yield* csvRecords(text);
      return;
    case 'json':
      for (const record of jsonRecords(text)) yield { record, end: text.length };
      return;
    case 'markdown': {
      let records;
      try {
        records = parseMarkdown(text, file);
      } catch (error) {
        if (error instanceof MarkdownError) throw new FileError('markdown', error.message);
        throw error;
      }
      for (const record of records) yield { record, end: text.length };
      return;
    }
    default:
      throw new TypeError(`not a format this peer parses: ${JSON.stringify(format)} (${FORMATS.join(', ')})`);
  }
}

// --- CSV ------------------------------------------------------------------------------------------

/**
 * RFC 4180 CSV: a header row, then rows with as many fields; fields may be quoted (`"a, b"`, `""` for a quote,
 * newlines inside quotes). Any row that breaks the rules fails the whole file. The title is the `title` or `name`
 * column (else the first), the body every field, `fields` the row by header name.
 */
function* csvRecords(text) {
  const rows = csvRows(text);
  const first = rows.next();
  if (first.done) throw new FileError('csv', 'empty file: no header row');
  const header = uniqueNames(first.value.fields);
  const lowered = header.map((name) => name.toLowerCase());
  const titleColumn = Math.max(lowered.findIndex((name) => name === 'title' || name === 'name'), 0);
  for (const row of rows) {
    if (row.fields.length !== header.length) {
      throw new FileError('csv', `line ${row.line}: ${row.fields.length} field(s) where the header has ${header.length}`);
    }
    yield {
      record: {
        title: row.fields[titleColumn],
        body: row.fields.join(' '),
        // fromEntries defines each name as an own member, so a column named __proto__ is data like any other.
        fields: Object.fromEntries(header.map((name, index) => [name, row.fields[index]])),
      },
      end: row.end,
    };
  }
}

const PLAIN_RUN = /[^,\n\r"]+/y;

/** The rows of CSV text as {line, fields, end}; blank lines are skipped. `line` counts from 1. */
export function* csvRows(text) {
  let fields = [];
  let field = '';
  let line = 1;
  let rowLine = 1;
  let quoted = false;
  let closedQuote = false;
  let index = 0;

  const endField = () => {
    fields.push(field);
    field = '';
    quoted = false;
    closedQuote = false;
  };
  // The finished row, unless it is a line with nothing on it.
  const endRow = () => {
    endField();
    const row = fields.length === 1 && fields[0] === '' ? null : { line: rowLine, fields, end: index };
    fields = [];
    return row;
  };

  while (index < text.length) {
    if (quoted && !closedQuote) {
      const close = text.indexOf('"', index);
      if (close === -1) throw new FileError('csv', `line ${rowLine}: a quoted field is never closed`);
      const inside = text.slice(index, close);
      line += countNewlines(inside);
      if (text[close + 1] === '"') {
        field += `${inside}"`;
        index = close + 2;
      } else {
        field += inside;
        closedQuote = true;
        index = close + 1;
      }
      continue;
    }
    const char = text[index];
    index += 1;
    switch (char) {
      case ',':
        endField();
        break;
      case '\n': {
        const row = endRow();
        if (row !== null) yield row;
        line += 1;
        rowLine = line;
        break;
      }
      case '"':
        if (field === '' && !quoted) {
          quoted = true;
          break;
        }
        throw new FileError('csv', `line ${line}: a quote inside a field that does not start with one`);
      default: {
        if (char === '\r' && text[index] === '\n') break; // CRLF ends the row at the \n
        if (closedQuote) throw new FileError('csv', `line ${line}: text after the closing quote of a field`);
        PLAIN_RUN.lastIndex = index;
        const run = char === '\r' ? null : PLAIN_RUN.exec(text);
        field += run === null ? char : char + run[0];
        if (run !== null) index = PLAIN_RUN.lastIndex;
      }
    }
  }
  if (quoted && !closedQuote) throw new FileError('csv', `line ${rowLine}: a quoted field is never closed`);
  if (field !== '' || fields.length > 0 || quoted) {
    const row = endRow();
    if (row !== null) yield row;
  }
}

function countNewlines(text) {
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) count += 1;
  return count;
}

/** Header names as JSON keys: blanks get a column number, repeats a suffix. */
function uniqueNames(names) {
  const seen = new Set();
  return names.map((name, index) => {
    let candidate = name === '' ? `column${index + 1}` : name;
    for (let suffix = 2; seen.has(candidate); suffix += 1) candidate = `${name}_${suffix}`;
    seen.add(candidate);
    return candidate;
  });
}

// --- JSON -----------------------------------------------------------------------------------------

/**
 * JSON: an array holds one record per element, an object is one record; anything else is refused. The title is
 * the `title` or `name` string, else the `id`; the body every string and number, depth first, object members in
 * key order.
 */
export function jsonRecords(text) {
  let document;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new FileError('json', `invalid JSON: ${error.message}`);
  }
  if (Array.isArray(document)) return document.map(jsonRecord);
  if (isObject(document)) return [jsonRecord(document)];
  throw new FileError('json', `a JSON file must hold an object or an array; this one holds ${JSON.stringify(document)}`);
}

function jsonRecord(value) {
  let title = '';
  if (isObject(value)) {
    if (typeof value.title === 'string') title = value.title;
    else if (typeof value.name === 'string') title = value.name;
    else if (Object.hasOwn(value, 'id')) title = plain(value.id);
  }
  const words = [];
  collectText(value, words);
  return { title, body: words.join(' '), fields: value };
}

function collectText(value, words) {
  if (typeof value === 'string' || typeof value === 'number') words.push(plain(value));
  else if (Array.isArray(value)) for (const element of value) collectText(element, words);
  else if (isObject(value)) for (const key of Object.keys(value).sort()) collectText(value[key], words);
}

function plain(value) {
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : JSON.stringify(value);
}

function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
