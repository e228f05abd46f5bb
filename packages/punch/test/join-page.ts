/**
 * The join steps as a peer's page serves them (src/io/join-steps.ts): the `<template id="join-steps">` of the
 * page's HTML, and the text of each command (`<pre data-step=… data-os=…>`), entities decoded, exactly as
 * the page shows it for copying.
 */
export interface JoinSteps {
  html: string;
  /** By `data-os` ("linux macos", "windows"). */
  download: Record<string, string>;
  send: string;
  feed: string;
  receive: string;
}

const decode = (s: string): string =>
  s
    .replace(/&#(\d+);/g, (_m, n: string) => String.fromCharCode(Number(n)))
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');

/**
 * The steps as the page script shows them on the page opened at `link`: it writes that link where the HTML
 * has the placeholder (src/io/console/console.js `joinLink`; test/interop/join-page.browser.test.ts checks that
 * the page shows exactly this). Without `link`, the HTML's own text.
 */
export function joinStepsOf(page: string, link?: string): JoinSteps {
  const html = /<template id="join-steps">([\s\S]*?)<\/template>/.exec(page)?.[1];
  if (html === undefined) throw new Error(`no join steps in the page:\n${page.slice(0, 400)}`);
  const steps: JoinSteps = { html, download: {}, send: '', feed: '', receive: '' };
  for (const m of html.matchAll(/<pre data-step="([a-z]+)"(?: data-os="([^"]+)")?>([\s\S]*?)<\/pre>/g)) {
    const [, step, os, text] = m;
    const raw = decode(text ?? '');
    const command = link === undefined ? raw : raw.replaceAll('<join link>', link);
    if (step === 'download') steps.download[os ?? ''] = command;
    else if (step === 'send' || step === 'feed' || step === 'receive') steps[step] = command;
  }
  return steps;
}
