/**
 * What a newcomer needs before the first click, shown on the landing page (the status service's page) and in the root README's quick
 * start (scripts/test/app/landing-notes.test.ts keeps the two the same; the npm-start tests log in with the
 * credential against the real timesvc).
 */

/** The demo's timesvc lab credential (config/timesvc.demo.yaml; packages/timesvc/README.md "The lab credential"). */
export const TIMESVC_LAB_USER = 'admin';
export const TIMESVC_LAB_PASSWORD = 'timesvc-lab';

/** The notes as the status service's config `notes` (shown as text above the cards of the landing page). */
export function landingNotes(): { id: string; title: string; text: string }[] {
  return [
    {
      id: 'credential',
      title: "timesvc dashboard login (the demo's lab credential)",
      text:
        `user ${TIMESVC_LAB_USER}, password ${TIMESVC_LAB_PASSWORD}. It is for a lab only: with ` +
        'environment: production timesvc refuses to start with it (packages/timesvc/README.md, "The lab credential").',
    },
    {
      id: 'base-url',
      title: 'Join links and QR codes',
      text:
        '(punch) point at 127.0.0.1, so they open on this machine only. For an encoder or phone on another ' +
        "machine, start with the address it can reach: PUNCH_HOST=0.0.0.0 PUNCH_BASE_URL=http://<this machine's " +
        'address>:8787 npm start (with --port-offset, add the offset to 8787).',
    },
  ];
}
