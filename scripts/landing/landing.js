// Live health on the landing page: asks the launcher's /api/status every 2 s and marks each service card.
const LABELS = {
  up: 'up',
  degraded: 'degraded',
  down: 'not answering',
  stopped: 'stopped',
  starting: 'starting…',
};

function show(card, state, detail) {
  const badge = card.querySelector('.health');
  badge.dataset.state = state;
  badge.textContent = LABELS[state] ?? state;
  card.querySelector('.detail').textContent = detail;
}

async function refresh() {
  let list;
  try {
    const res = await fetch('/api/status', { cache: 'no-store' });
    list = (await res.json()).services;
  } catch {
    for (const card of document.querySelectorAll('.card'))
      show(card, 'down', 'the launcher is not answering (stopped?)');
    return;
  }
  for (const s of list) {
    const card = document.querySelector(`.card[data-service="${CSS.escape(s.name)}"]`);
    if (card) show(card, s.state, s.detail);
  }
  document.body.dataset.updated = new Date().toISOString();
}

await refresh();
setInterval(() => void refresh(), 2000);
