import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FileError, csvRows, decodeText, importFile, jsonRecords, parseRecords } from '../formats.mjs';

/** The FileError a function throws: [kind, message]. */
function refusal(fn) {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof FileError, `expected a FileError, got ${error}`);
    return [error.kind, error.message];
  }
  assert.fail('expected a FileError, nothing was thrown');
}

const csv = (text) => parseRecords('csv', text, 'f.csv');

test('CSV: quoted fields with commas, doubled quotes and CRLF inside; blank lines skipped; fields by header', () => {
  const records = csv('name,note\r\n"Smith, Ann","said ""hi""\r\nthen left"\r\n\r\nBob,plain\r\n,\r\n');
  assert.deepEqual(records.map((r) => r.fields), [
    { name: 'Smith, Ann', note: 'said "hi"\r\nthen left' }, { name: 'Bob', note: 'plain' }, { name: '', note: '' },
  ]);
  assert.deepEqual(records.map((r) => [r.title, r.body]), [
    ['Smith, Ann', 'Smith, Ann said "hi"\r\nthen left'], ['Bob', 'Bob plain'], ['', ' '],
  ]);
});

test('CSV: the title is the title or name column, else the first; blank and repeated names get made unique', () => {
  assert.equal(csv('id,Title\n7,Seven\n')[0].title, 'Seven');
  assert.equal(csv('id,city\n7,Oslo\n')[0].title, '7');
  assert.deepEqual(Object.keys(csv('a,,a,a\n1,2,3,4\n')[0].fields), ['a', 'column2', 'a_2', 'a_3']);
  assert.deepEqual(csv('__proto__,b\nx,y\n')[0].fields, Object.fromEntries([['__proto__', 'x'], ['b', 'y']]));
});

test('CSV: no newline at the end, a header alone, a lone CR kept inside a field', () => {
  assert.deepEqual(csv('a,b\n1,2').map((r) => r.fields), [{ a: '1', b: '2' }]);
  assert.deepEqual(csv('a,b\n'), []);
  assert.deepEqual(csv('a\nx\ry\n').map((r) => r.fields.a), ['x\ry']);
});

test('CSV: broken files are refused with the line', () => {
  assert.deepEqual(refusal(() => csv('')), ['csv', 'empty file: no header row']);
  assert.deepEqual(refusal(() => csv('\n\n')), ['csv', 'empty file: no header row']);
  assert.deepEqual(refusal(() => csv('a,b\n1,x"y\n')), ['csv', 'line 2: a quote inside a field that does not start with one']);
  assert.deepEqual(refusal(() => csv('a,b\n1,2\n3,4,5\n')), ['csv', 'line 3: 3 field(s) where the header has 2']);
  assert.deepEqual(refusal(() => csv('a,b\n"x\ny",2\n"open,1\n')), ['csv', 'line 4: a quoted field is never closed']);
  assert.deepEqual(refusal(() => csv('a,b\n"x"y,2\n')), ['csv', 'line 2: text after the closing quote of a field']);
});

test('CSV rows: line numbers count newlines inside quotes, and each row says where it ends', () => {
  const text = 'h\n"a\nb"\nc\n';
  assert.deepEqual([...csvRows(text)], [
    { line: 1, fields: ['h'], end: 2 }, { line: 2, fields: ['a\nb'], end: 8 }, { line: 4, fields: ['c'], end: 10 },
  ]);
});

test('JSON: an array is one record per element, an object one record; titles and bodies', () => {
  const records = jsonRecords('[{"title": "caf\u00e9 cr\u00e8me"}, 7, "text", {"name": "n", "deep": {"k": [1, "z"]}}, {"id": 12, "b": true, "a": null}]');
  assert.deepEqual(records.map((r) => [r.title, r.body]), [
    ['caf\u00e9 cr\u00e8me', 'caf\u00e9 cr\u00e8me'], ['', '7'], ['', 'text'], ['n', '1 z n'], ['12', '12'],
  ]);
  assert.deepEqual(records[3].fields, { name: 'n', deep: { k: [1, 'z'] } });
  assert.deepEqual(jsonRecords('{"title": 5, "name": "by name"}').map((r) => r.title), ['by name']);
});

test('JSON: anything but an object or an array, and text that is not JSON, is refused', () => {
  assert.deepEqual(refusal(() => jsonRecords('42')), ['json', 'a JSON file must hold an object or an array; this one holds 42']);
  assert.deepEqual(refusal(() => jsonRecords('"s"')), ['json', 'a JSON file must hold an object or an array; this one holds "s"']);
  const [kind, message] = refusal(() => jsonRecords('{"title": "almost JSON"\n "tags": ["a", "b"]}\n'));
  assert.equal(kind, 'json');
  assert.match(message, /^invalid JSON: .*position/);
});

test('binary content: a NUL byte (with its offset) or bytes that are not UTF-8', () => {
  assert.deepEqual(refusal(() => decodeText(Buffer.from('ab\0c'))), ['binary', 'binary content: a NUL byte at offset 2']);
  assert.deepEqual(refusal(() => decodeText(Buffer.from('name\ncaf\u00e9\n', 'latin1'))), ['binary', 'binary content: not UTF-8 text']);
  assert.equal(decodeText(Buffer.from('caf\u00e9')), 'caf\u00e9');
});

test('Markdown: records from markdown.mjs, and its refusals with the kind markdown', () => {
  assert.deepEqual(parseRecords('markdown', '# A\ntext\n', 'n.md').map((r) => r.title), ['A']);
  assert.deepEqual(refusal(() => parseRecords('markdown', '---\ntitle: x\n', 'n.md')),
    ['markdown', 'the front-matter opened on line 1 is never closed (no --- line after it)']);
});

test('importFile reports progress every N records with exact byte counts, and ends with every record', async () => {
  const rows = Array.from({ length: 25 }, (_, i) => `${i},caf\u00e9 ${i}`);
  const bytes = Buffer.from(`id,name\n${rows.join('\n')}\n`);
  const reports = [];
  const records = await importFile({ file: 'f.csv', format: 'csv', bytes }, { progress: (p) => reports.push(p), every: 10 });
  assert.equal(records.length, 25);
  const header = Buffer.byteLength('id,name\n');
  const through = (n) => header + rows.slice(0, n).reduce((sum, row) => sum + Buffer.byteLength(row) + 1, 0);
  assert.deepEqual(reports, [
    { records: 10, bytesDone: through(10), bytesTotal: bytes.length },
    { records: 20, bytesDone: through(20), bytesTotal: bytes.length },
  ]);
});

test('importFile stops at a progress point once its signal is aborted', async () => {
  const bytes = Buffer.from(`n\n${Array.from({ length: 50 }, (_, i) => i).join('\n')}\n`);
  const controller = new AbortController();
  await assert.rejects(
    importFile({ file: 'f.csv', format: 'csv', bytes }, { every: 10, signal: controller.signal, progress: () => controller.abort() }),
    { name: 'AbortError' });
});
