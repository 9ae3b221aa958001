import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseMarkdown, MarkdownError } from '../markdown.mjs';

test('front-matter, an intro and headings become one record per section', () => {
  const records = parseMarkdown([
    '---',
    'title: "Field notes"',
    'tags: [harbor, tide]',
    'visits: 3',
    'draft: false',
    'people:',
    '  - Ada',
    '  - Grace',
    '---',
    'Intro with [a map](https://example.org/map "the map") and <https://example.org/x>.',
    '',
    '# First ##',
    'Some **bold** text.',
    '## Second',
    'More.',
  ].join('\n'), 'notes/a.md');

  assert.deepEqual(records.map((r) => [r.title, r.fields.level]), [['Field notes', 0], ['First', 1], ['Second', 2]]);
  assert.deepEqual(records[0].fields.frontMatter, {
    title: 'Field notes', tags: ['harbor', 'tide'], visits: 3, draft: false, people: ['Ada', 'Grace'],
  });
  assert.equal(records[0].body, 'Intro with a map and https://example.org/x.');
  assert.deepEqual(records[0].fields.links, [
    { text: 'a map', url: 'https://example.org/map' },
    { text: 'https://example.org/x', url: 'https://example.org/x' },
  ]);
  assert.equal(records[1].body, 'First\nSome bold text.');
});

test('without front-matter the title comes from the file name, and an empty intro is no record', () => {
  const records = parseMarkdown('# Only heading\ntext\n', 'dir/my-note.markdown');
  assert.deepEqual(records.map((r) => r.title), ['Only heading']);
  assert.deepEqual(parseMarkdown('just text', 'dir/my-note.md').map((r) => r.title), ['my-note']);
});

test('a # line inside a code block is not a heading', () => {
  const records = parseMarkdown('# A\n```sh\n# a comment\n```\n~~~\n## still code\n~~~\n# B\n');
  assert.deepEqual(records.map((r) => r.title), ['A', 'B']);
  assert.match(records[0].body, /# a comment/);
});

test('broken front-matter is refused with the line it is on', () => {
  assert.throws(() => parseMarkdown('---\ntitle: x\n\n# never closed\n'), (error) =>
    error instanceof MarkdownError && /never closed/.test(error.message));
  assert.throws(() => parseMarkdown('---\ntitle: x\nnot a pair\n---\n'), (error) =>
    error instanceof MarkdownError && /front-matter line 3/.test(error.message));
  assert.throws(() => parseMarkdown('---\ntags: [a, b\n---\n'), /line 2: a list opened with \[/);
  assert.throws(() => parseMarkdown(42), MarkdownError);
});
