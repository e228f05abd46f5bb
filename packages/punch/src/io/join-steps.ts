import { isLoopbackHost } from '../config.ts';

/**
 * The join page's steps for a peer (README "Pages", docs/agent.md "Without a checkout"): install Node.js
 * and srt-live-transmit, download the single-file agent from this broker, run it with node and the join
 * link. Rendered by the broker into the page (a `<template>` the page script shows), so the download names
 * the broker's public address (`PUNCH_BASE_URL`) and the agent file of the version it runs; the page script
 * writes the page's own address (the join link) where LINK_PLACEHOLDER stands. The download URL carries no
 * token; the join link goes only on the agent's command line.
 */
export interface JoinStepsInput {
  /**
   * The join link in the commands. The page is rendered with LINK_PLACEHOLDER (the token is never written
   * into the HTML, README "Pages"); its script puts the page's own address there.
   */
  link: string;
  /** The broker's public origin (`{base_url}`). */
  base: string;
  /** `punch-agent-<version>.mjs`. */
  agentFile: string;
}

/** What the page's HTML has where the join link goes; the page script replaces it with its own address. */
export const LINK_PLACEHOLDER = '<join link>';

/** The name the download is saved under: the commands stay the same from one broker version to the next. */
export const AGENT_LOCAL_NAME = 'punch-agent.mjs';

/** POSIX shells and PowerShell both take a single-quoted word literally; each doubles its quote its own way. */
const posixQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
const powershellQuote = (s: string): string => `'${s.replace(/'/g, "''")}'`;

export interface JoinCommands {
  downloadPosix: string;
  downloadWindows: string;
  send: string;
  feed: string;
  receive: string;
}

export function joinCommands(input: JoinStepsInput): JoinCommands {
  const url = `${input.base}/agent/${input.agentFile}`;
  // Single quotes are literal in both sh and PowerShell; a join link holds no quote (names are
  // [A-Za-z0-9._~-], tokens base64url), so one run command serves every OS.
  const run = `node ${AGENT_LOCAL_NAME} --link ${posixQuote(input.link)}`;
  return {
    downloadPosix: `curl -fsSLo ${AGENT_LOCAL_NAME} ${posixQuote(url)}`,
    downloadWindows: `curl.exe -fsSLo ${AGENT_LOCAL_NAME} ${powershellQuote(url)}`,
    send: `${run} --role sender --port 9000 --input udp://127.0.0.1:5000`,
    feed: 'ffmpeg -re -i <your source> -c copy -f mpegts "udp://127.0.0.1:5000?pkt_size=1316"',
    receive: `${run} --role receiver --port 9000 --output udp://127.0.0.1:5001`,
  };
}

/** Whether links under `base` reach only the broker's own machine (the quick start's 127.0.0.1). */
export function isLoopbackBase(base: string): boolean {
  let host: string;
  try {
    host = new URL(base).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return false;
  }
  return isLoopbackHost(host);
}

/**
 * The note shown wherever links are handed out (startup log, create page, console, join page) while the
 * public base URL is a loopback address: other machines cannot follow those links until it is set.
 */
export function loopbackBaseNote(base: string): string {
  return (
    `Join links, QR codes and agent downloads point at ${base}, which only this machine reaches. ` +
    'For devices elsewhere, start the broker with PUNCH_BASE_URL set to the address they reach ' +
    '(e.g. PUNCH_BASE_URL=https://punch.example.com behind a TLS proxy, or http://<LAN address of this machine>:8787 ' +
    'with PUNCH_HOST=0.0.0.0 on a trusted network).'
  );
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const pre = (step: string, text: string, os?: string): string =>
  `<pre data-step="${step}"${os ? ` data-os="${os}"` : ''}>${escapeHtml(text)}</pre>`;

/** The steps as HTML, one list; commands in `<pre data-step=…>` (the page adds a Copy button to each). */
export function renderJoinSteps(input: JoinStepsInput): string {
  const c = joinCommands(input);
  const note = isLoopbackBase(input.base)
    ? `<p class="warn-note">${escapeHtml(loopbackBaseNote(input.base))}</p>`
    : '';
  return (
    `<div class="join-steps"><h3>Join this stream</h3>` +
    `<p class="muted">You need Node.js 20 or later and srt-live-transmit; nothing else. The agent is one ` +
    `file from this broker (<a href="/agent/${escapeHtml(input.agentFile)}">${escapeHtml(input.agentFile)}</a>).</p>` +
    note +
    `<ol>` +
    `<li>Install Node.js 20+ and srt-live-transmit:<ul>` +
    `<li><b>Linux</b>: Node.js from <a href="https://nodejs.org/en/download">nodejs.org</a> (or your distribution, if it has 20+); ` +
    `<code>sudo apt-get install srt-tools</code> (Debian/Ubuntu) or <code>sudo dnf install srt</code> (Fedora).</li>` +
    `<li><b>macOS</b>: <code>brew install node srt</code>.</li>` +
    `<li><b>Windows</b>: <code>winget install OpenJS.NodeJS.LTS</code>; srt-live-transmit has no Windows package: ` +
    `build it from the SRT sources (github.com/Haivision/srt) and add <code>--srt C:\\path\\to\\srt-live-transmit.exe</code> ` +
    `to the commands below, or run the Linux steps in WSL.</li></ul></li>` +
    `<li>Download the agent from this broker into an empty folder:<ul>` +
    `<li><b>Linux, macOS</b> (terminal):${pre('download', c.downloadPosix, 'linux macos')}</li>` +
    `<li><b>Windows</b> (PowerShell):${pre('download', c.downloadWindows, 'windows')}</li></ul></li>` +
    `<li>Sending: run the agent (the same command on every system)${pre('send', c.send)}` +
    `and feed it MPEG-TS over UDP${pre('feed', c.feed)}</li>` +
    `<li>Receiving instead: run the agent and play <code>udp://127.0.0.1:5001</code>${pre('receive', c.receive)}</li>` +
    `<li>Other tools (OBS, vMix, GStreamer, FFmpeg): the operator copies your connection string from the ` +
    `console once both ends have joined; it contains the passphrase.</li>` +
    `</ol></div>`
  );
}
