// Markdown with front-matter -> records, one per section: the ETL step the import host delegates to Node.
//
// A record is {title, body, fields}: `title` is the section's heading (the document's title for the text
// before the first heading), `body` is the heading and its text with link syntax reduced to the link text
// (what the full-text index should see), and `fields` keeps the structure: front-matter, heading level,
// the section's links.

/** A Markdown file the ETL step refuses; its message names the line. */
export class MarkdownError extends Error {
  constructor(message) {
    super(message);
    this.name = 'MarkdownError';
  }
}

/** Parses one Markdown document into records. `file` is only used for a title when nothing better exists. */
export function parseMarkdown(text, file = 'document.md') {
  if (typeof text !== 'string') throw new MarkdownError('the payload needs the file text as a string');
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  const { frontMatter, bodyStart } = readFrontMatter(lines);
  const documentTitle = typeof frontMatter.title === 'string' && frontMatter.title !== ''
    ? frontMatter.title
    : file.replace(/^.*\//, '').replace(/\.(md|markdown)$/i, '');

  const sections = [];
  let current = { title: documentTitle, level: 0, lines: [] };
  // The opening fence (``` or ~~~) while inside a code block; an unclosed one runs to the end, as in CommonMark.
  let fence = null;
  for (let index = bodyStart; index < lines.length; index += 1) {
    const line = lines[index];
    const fenceMatch = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fenceMatch) {
      if (fence === null) fence = fenceMatch[1];
      else if (fenceMatch[1][0] === fence[0] && fenceMatch[1].length >= fence.length) fence = null;
      current.lines.push(line);
      continue;
    }
    const heading = fence === null ? /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line) : null;
    if (heading) {
      sections.push(current);
      current = { title: heading[2], level: heading[1].length, lines: [] };
    } else {
      current.lines.push(line);
    }
  }
  sections.push(current);

  return sections
    .filter((section) => section.level > 0 || section.lines.some((line) => line.trim() !== ''))
    .map((section) => {
      const raw = section.lines.join('\n').trim();
      const links = findLinks(raw);
      const text = plainText(raw);
      return {
        title: plainText(section.title),
        body: section.level > 0 ? `${plainText(section.title)}\n${text}`.trim() : text,
        fields: { frontMatter, level: section.level, links },
      };
    });
}

// --- front-matter: a YAML subset (key: value, [a, b] lists, "- item" lists, quoted strings, numbers) ---

function readFrontMatter(lines) {
  if (lines[0]?.trim() !== '---') return { frontMatter: {}, bodyStart: 0 };
  const end = lines.findIndex((line, index) => index > 0 && (line.trim() === '---' || line.trim() === '...'));
  if (end === -1) throw new MarkdownError('the front-matter opened on line 1 is never closed (no --- line after it)');
  const frontMatter = {};
  let listKey = null; // the key whose "- item" lines follow
  for (let index = 1; index < end; index += 1) {
    const line = lines[index];
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    const item = /^\s+-\s+(.*)$/.exec(line) ?? /^-\s+(.*)$/.exec(line);
    if (item && listKey !== null) {
      frontMatter[listKey].push(scalar(item[1]));
      continue;
    }
    const pair = /^([A-Za-z_][\w-]*)\s*:\s*(.*)$/.exec(line);
    if (!pair) throw new MarkdownError(`front-matter line ${index + 1}: expected "key: value", got ${JSON.stringify(line)}`);
    const [, key, value] = pair;
    if (value === '') {
      frontMatter[key] = [];
      listKey = key;
    } else {
      frontMatter[key] = value.startsWith('[') ? flowList(value, index + 1) : scalar(value);
      listKey = null;
    }
  }
  return { frontMatter, bodyStart: end + 1 };
}

function flowList(value, lineNumber) {
  if (!value.endsWith(']')) throw new MarkdownError(`front-matter line ${lineNumber}: a list opened with [ is not closed on the same line`);
  const inside = value.slice(1, -1).trim();
  return inside === '' ? [] : inside.split(',').map((part) => scalar(part.trim()));
}

function scalar(text) {
  const value = text.trim();
  const quoted = /^"(.*)"$/.exec(value) ?? /^'(.*)'$/.exec(value);
  if (quoted) return quoted[1];
  if (/^-?\d+(\.\d+)?$/.test(value)) return Number(value);
  if (value === 'true' || value === 'false') return value === 'true';
  if (value === 'null' || value === '~') return null;
  return value;
}

// --- inline text --------------------------------------------------------------------------------

const INLINE_LINK = /!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
const AUTOLINK = /<(https?:\/\/[^>\s]+)>/g;

function findLinks(text) {
  const links = [];
  for (const match of text.matchAll(INLINE_LINK)) links.push({ text: match[1], url: match[2] });
  for (const match of text.matchAll(AUTOLINK)) links.push({ text: match[1], url: match[1] });
  return links;
}

/** The words a reader sees: link text without the URL, no emphasis markers or heading hashes. */
function plainText(text) {
  return text
    .replace(INLINE_LINK, '$1')
    .replace(AUTOLINK, '$1')
    .replace(/(\*\*|__|`)/g, '')
    .replace(/^\s{0,3}>\s?/gm, '')
    .replace(/[ \t]+\n/g, '\n')
    .trim();
}
