/**
 * What a newcomer needs before the first click, shown on the landing page and in the root README's quick
 * start (scripts/test/docs-truth.test.ts keeps the two the same; the npm-start tests log in with the
 * credential against the real timesvc).
 */

/** The demo's timesvc lab credential (config/timesvc.demo.yaml; packages/timesvc/README.md "The lab credential"). */
export const TIMESVC_LAB_USER = 'admin';
export const TIMESVC_LAB_PASSWORD = 'timesvc-lab';

/** The notes as HTML for the landing page (no user input in them). */
export function landingNotesHtml(): string {
  return `<section class="notes" aria-label="Before you start">
<h2>Before you start</h2>
<ul>
<li id="note-credential"><strong>timesvc dashboard login</strong> (the demo's lab credential): user <code>${TIMESVC_LAB_USER}</code>, password <code>${TIMESVC_LAB_PASSWORD}</code>. It is for a lab only: with <code>environment: production</code> timesvc refuses to start with it (packages/timesvc/README.md, "The lab credential").</li>
<li id="note-base-url"><strong>Join links and QR codes</strong> (punch) point at <code>127.0.0.1</code>, so they open on this machine only. For an encoder or phone on another machine, start with the address it can reach: <code>PUNCH_HOST=0.0.0.0 PUNCH_BASE_URL=http://&lt;this machine's address&gt;:8787 npm start</code> (with <code>--port-offset</code>, add the offset to 8787).</li>
</ul>
</section>`;
}
