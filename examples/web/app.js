// The import service's page, written as for a WKWebView: plain requests go to the host's handlers through
// window.webkit.messageHandlers (WKScriptMessageHandlerWithReply: a Promise of the reply). WebKit has no streaming,
// so the import's live progress, its cancelling and the catalogChanged broadcasts go through the browser peer that
// the WebKit layer connected (`await globalThis.__zerobridge.peer`): one session per page load. A peer of the page's
// own would be a second session, under a second name, for the same tab.

const $ = (id) => document.getElementById(id);
const count = (n) => n.toLocaleString('en');
/** How many hits a search shows. */
const SEARCH_LIMIT = 5;
/** How many catalogChanged entries the page keeps: the oldest go first. */
const CHANGES_KEPT = 50;
/** How many failed files the outcome lists. */
const ERRORS_SHOWN = 20;

/** A request to a host handler, as a page in a WKWebView makes it. */
function ask(handler, body = null) {
  const handlers = globalThis.webkit?.messageHandlers;
  if (!handlers?.[handler]) return Promise.reject(new Error(`no message handler '${handler}' in this page`));
  return handlers[handler].postMessage(body);
}

/** Sets a <data> element: its machine-readable value, and the same number as text. */
function setNumber(id, value) {
  const element = $(id);
  element.value = String(value);
  element.textContent = count(value);
}

function setState(state, text) {
  document.body.dataset.state = state;
  if (text !== undefined) $('progress-text').textContent = text;
  const importing = state === 'importing';
  $('start').disabled = importing || $('folder').options.length === 0;
  $('folder').disabled = importing;
  $('cancel').disabled = !importing;
}

function showProgress(p) {
  const bar = $('bar');
  bar.max = Math.max(p.filesTotal, 1);
  bar.value = p.filesDone;
  setNumber('files-done', p.filesDone);
  setNumber('files-total', p.filesTotal);
  setNumber('records', p.records);
  setNumber('files-failed', p.filesFailed);
  setNumber('files-per-second', Math.round(p.filesPerSecond));
  const percent = p.filesTotal === 0 ? 100 : Math.floor((100 * p.filesDone) / p.filesTotal);
  $('progress-text').textContent = `Importing: ${percent}%${p.currentFile ? `, at ${p.currentFile}` : ''}`;
}

function showOutcome(text, errors = []) {
  $('outcome').hidden = false;
  $('outcome-text').textContent = text;
  const list = $('error-list');
  list.replaceChildren(...errors.slice(0, ERRORS_SHOWN).map((error) => {
    const item = document.createElement('li');
    item.textContent = `${error.file}: [${error.kind}] ${error.message}`;
    return item;
  }));
  $('errors').hidden = errors.length === 0;
}

async function refreshStats() {
  const stats = await ask('stats');
  setNumber('catalogue-files', stats.files);
  setNumber('catalogue-records', stats.records);
}

/** A search hit's snippet, its matched words (in [brackets] from the host) marked, as text nodes only. */
function snippet(text) {
  const parts = text.split(/\[([^\]]*)\]/);
  return parts.map((part, i) => {
    if (i % 2 === 0) return document.createTextNode(part);
    const mark = document.createElement('mark');
    mark.textContent = part;
    return mark;
  });
}

async function search(query) {
  const found = await ask('search', { query, limit: SEARCH_LIMIT });
  const summary = $('search-summary');
  summary.dataset.total = String(found.total);
  summary.textContent = found.total === 0 ? `No record matches “${found.query}”.`
    : `${count(found.total)} records match “${found.query}”${found.total > found.hits.length ? `; the best ${found.hits.length}:` : ':'}`;
  $('hits').replaceChildren(...found.hits.map((hit) => {
    const item = document.createElement('li');
    Object.assign(item.dataset, { file: hit.file, record: String(hit.record), format: hit.format });
    const title = document.createElement('strong');
    title.textContent = hit.title;
    const where = document.createElement('span');
    where.className = 'where';
    where.textContent = ` ${hit.file} #${hit.record} (${hit.format})`;
    const text = document.createElement('p');
    text.append(...snippet(hit.snippet));
    item.append(title, where, text);
    return item;
  }));
}

/** A folder's own name, as the folder list shows it. */
const folderName = (path) => path.split('/').filter(Boolean).pop() ?? path;

function showChange(change) {
  const item = document.createElement('li');
  Object.assign(item.dataset, {
    run: String(change.run), folder: change.folder, status: change.status, filesImported: String(change.filesImported),
    records: String(change.records), files: String(change.files), recordsTotal: String(change.recordsTotal),
  });
  const time = document.createElement('time');
  time.dateTime = new Date().toISOString();
  time.textContent = new Date().toLocaleTimeString('en-GB');
  const folder = document.createElement('strong');
  folder.textContent = folderName(change.folder);
  folder.title = change.folder;
  item.append(time, ` Run ${change.run} `, folder, ` ${change.status}: ${count(change.filesImported)} files, `
    + `${count(change.records)} records imported; the catalogue holds ${count(change.files)} files, `
    + `${count(change.recordsTotal)} records.`);
  // The host broadcasts a run's change before it answers the run's caller: this page's own arrives while it imports.
  if (change.folder === importingFolder) {
    item.dataset.mine = 'true';
    const mine = document.createElement('span');
    mine.className = 'mine';
    mine.textContent = 'this page';
    item.append(' ', mine);
  }
  const list = $('changes');
  list.prepend(item);
  while (list.children.length > CHANGES_KEPT) list.lastElementChild.remove();
}

let peer;
let job = null;
/** The folder of the import this page runs, while it runs. */
let importingFolder = null;

// The import this tab runs, kept in its sessionStorage: reloaded, the page attaches to the job again instead of losing
// it (a job outlives its caller, SPEC 7.16). The job id is what proves it is this page's job, as the key is kept here.
const SAVED_JOB = 'zerobridge-import-job';

function savedJob() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(SAVED_JOB) ?? 'null');
    return typeof saved?.job === 'string' && typeof saved?.path === 'string' ? saved : null;
  } catch {
    return null;  // not ours, or damaged: nothing to attach to
  }
}

async function runImport(path) {
  $('outcome').hidden = true;
  showProgress({ filesDone: 0, filesTotal: 0, records: 0, filesFailed: 0, filesPerSecond: 0 });
  setState('importing', `Starting the import of ${folderName(path)}…`);
  document.body.dataset.imports = String(Number(document.body.dataset.imports ?? 0) + 1);
  try {
    ({ job } = await peer.startJob('importFolder', { path }));
  } catch (error) {
    setState('failed', `The import could not start: ${error.message}`);
    return;
  }
  sessionStorage.setItem(SAVED_JOB, JSON.stringify({ job, path }));
  await follow(path);
}

/** Follows the job in `job` to its end: its progress (from the first report), then its outcome. */
async function follow(path) {
  importingFolder = path;
  try {
    const call = peer.attachJob({ job });
    for await (const progress of call.progress) showProgress(progress);
    const result = await call.result;
    showProgress({ ...result, filesDone: result.filesTotal });
    setState('completed', `The import of ${folderName(path)} completed.`);
    showOutcome(`${count(result.filesImported)} files imported (${count(result.filesFailed)} failed): `
      + `${count(result.records)} records in ${result.seconds.toFixed(1)} s.`, result.errors);
  } catch (error) {
    if (error.code === 'cancelled') {
      setState('cancelled', 'Cancelled: each file is in the database whole or not at all.');
    } else {
      setState('failed', `The import failed: ${error.message}`);
    }
  } finally {
    job = null;
    importingFolder = null;
    sessionStorage.removeItem(SAVED_JOB);
  }
  await refreshStats();
}

async function cancelImport() {
  if (job === null) return;
  $('cancel').disabled = true;
  $('progress-text').textContent = 'Cancelling…';
  try {
    await peer.cancelJob({ job });
  } catch (error) {
    $('progress-text').textContent = `Could not cancel: ${error.message}`;
  }
}

async function start() {
  const { folders, omitted } = await ask('folders');
  $('folder').replaceChildren(...folders.map(({ path, name }) => new Option(name, path)));
  if (omitted > 0) $('folder').title = `${omitted} more folders are not listed`;

  const connecting = globalThis.__zerobridge?.peer;
  if (connecting === undefined) throw new Error('this page was not served by a ZeroBridge host (it has no globalThis.__zerobridge)');
  peer = await connecting;
  // The subscription's hello goes before the stats request below, so broadcasts arrive from before the page is idle.
  peer.on('catalogChanged', (change) => {
    showChange(change);
    refreshStats().catch(() => {});
  }).subscribe('catalog');
  $('connection').textContent = `Connected to ${peer.host}.`;
  $('search').disabled = false;
  await refreshStats();
  const saved = savedJob();
  if (saved === null) {
    setState('idle');
    return;
  }
  ({ job } = saved);
  $('folder').value = saved.path;
  setState('importing', `Attached again to the import of ${folderName(saved.path)}…`);
  await follow(saved.path);
}

$('import-form').addEventListener('submit', (event) => {
  event.preventDefault();
  runImport($('folder').value);
});
$('cancel').addEventListener('click', cancelImport);
$('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  search($('query').value.trim()).catch((error) => {
    $('search-summary').textContent = `The search failed: ${error.message}`;
  });
});

start().catch((error) => {
  document.body.dataset.state = 'disconnected';
  $('connection').textContent = `Cannot reach the import host: ${error.message}`;
});
