// The status page: asks /api/fleet every poll interval and updates each service's card in place. When the
// status service itself stops answering, every card turns grey with the age of what it shows.
const fleetEl = document.getElementById('fleet');
const freshEl = document.getElementById('freshness');
const notesEl = document.getElementById('notes');
const LABEL = { green: 'OK', amber: 'WARNING', red: 'DOWN', unknown: 'NOT POLLED YET' };
let lastOk = 0;
let intervalMs = 2000;
let failure = '';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function card(name) {
  let c = fleetEl.querySelector(`[data-service="${CSS.escape(name)}"]`);
  if (c) return c;
  c = el('section', 'card');
  c.dataset.service = name;
  const head = el('header', 'head');
  const title = el('h2', 'name');
  head.append(title, el('span', 'badge'));
  c.append(head, el('p', 'reason'), el('dl', 'figures'), el('p', 'age'), el('div', 'about'));
  fleetEl.append(c);
  return c;
}

function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 90 ? `${s} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
}

// The notes and each card's links, ports and docs come from the config: drawn again only when they change.
function renderNotes(notes) {
  const key = JSON.stringify(notes);
  if (notesEl.dataset.key === key) return;
  notesEl.dataset.key = key;
  notesEl.hidden = notes.length === 0;
  const list = el('ul');
  for (const n of notes) {
    const li = el('li');
    li.id = `note-${n.id}`;
    li.append(el('strong', '', n.title), document.createTextNode(`: ${n.text}`));
    list.append(li);
  }
  notesEl.replaceChildren(el('h2', '', 'Before you start'), list);
}

function link(l) {
  const li = el('li');
  if (l.template || !/^https?:/.test(l.url))
    li.append(el('span', 'label', l.label), ' ', el('code', '', l.url));
  else {
    const a = el('a', '', l.label);
    a.href = l.url;
    li.append(a, ' ', el('code', '', l.url));
  }
  return li;
}

function renderAbout(c, s) {
  const about = c.querySelector('.about');
  const key = JSON.stringify([s.title, s.links, s.ports, s.docs]);
  if (about.dataset.key === key) return;
  about.dataset.key = key;
  const parts = [];
  if (s.title) parts.push(el('p', 'title', s.title));
  const pages = s.links.filter((l) => l.page);
  const others = s.links.filter((l) => !l.page);
  if (pages.length) parts.push(el('h3', '', 'Pages'), el('ul', 'links'));
  if (pages.length) parts.at(-1).append(...pages.map(link));
  if (others.length) parts.push(el('h3', '', 'API and monitoring'), el('ul', 'links'));
  if (others.length) parts.at(-1).append(...others.map(link));
  if (s.ports.length) {
    const ul = el('ul', 'ports');
    for (const p of s.ports) {
      const li = el('li');
      li.append(el('span', 'label', p.label));
      if (p.port !== undefined)
        li.append(' ', el('code', '', `${p.proto ?? ''} ${p.port}${p.outbound ? ' (sent to)' : ''}`));
      if (p.use) li.append(el('div', 'use', p.use));
      ul.append(li);
    }
    parts.push(el('h3', '', 'Other ports'), ul);
  }
  if (s.docs) {
    const d = el('p', 'docs', 'Docs: ');
    d.append(el('code', '', s.docs));
    parts.push(d);
  }
  about.replaceChildren(...parts);
}

function render(data) {
  renderNotes(data.notes ?? []);
  intervalMs = data.pollIntervalMs || intervalMs;
  document.body.dataset.overall = data.overall;
  for (const s of data.services) {
    const c = card(s.name);
    c.dataset.level = s.level;
    const title = c.querySelector('.name');
    if (s.page) {
      let a = title.querySelector('a');
      if (!a) {
        title.textContent = '';
        a = el('a');
        title.append(a);
      }
      a.href = s.page;
      a.textContent = s.name;
    } else title.textContent = s.name;
    c.querySelector('.badge').textContent = LABEL[s.level] || s.level;
    c.querySelector('.reason').textContent = s.reason;
    const dl = c.querySelector('.figures');
    const rows = Object.entries(s.figures).filter(([, v]) => v !== null);
    const key = JSON.stringify(rows);
    if (dl.dataset.key !== key) {
      dl.dataset.key = key;
      dl.replaceChildren(
        ...rows.flatMap(([k, v]) => [el('dt', '', k.replace(/_/g, ' ')), el('dd', '', String(v))]),
      );
    }
    c.dataset.checkedAt = s.checkedAt ?? '';
    renderAbout(c, { links: [], ports: [], ...s });
  }
}

function tick() {
  const now = Date.now();
  const stale = lastOk === 0 || now - lastOk > 2 * intervalMs + 1000;
  document.body.dataset.stale = String(stale);
  if (stale) {
    freshEl.textContent =
      lastOk === 0
        ? `status service not reachable${failure ? `: ${failure}` : ''}`
        : `status service not reachable${failure ? ` (${failure})` : ''}: showing what it said ${age(now - lastOk)} ago`;
  } else freshEl.textContent = `live, updated ${age(now - lastOk)} ago`;
  for (const c of fleetEl.querySelectorAll('.card')) {
    const at = Number(c.dataset.checkedAt);
    const checked = at ? `checked ${age(now - at)} ago` : 'not checked';
    const known = LABEL[c.dataset.level] || c.dataset.level;
    c.querySelector('.badge').textContent = stale ? 'STALE' : known;
    c.querySelector('.age').textContent = stale ? `last known: ${known}, ${checked}` : checked;
  }
}

async function refresh() {
  try {
    const res = await fetch('/api/fleet', { cache: 'no-store', signal: AbortSignal.timeout(intervalMs) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    render(await res.json());
    lastOk = Date.now();
    failure = '';
  } catch (err) {
    failure = err instanceof Error ? err.message : String(err);
  }
  tick();
  setTimeout(() => void refresh(), intervalMs);
}

setInterval(tick, 1000);
void refresh();
