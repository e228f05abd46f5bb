/**
 * `@broadcast-ops/timesvc/testing`: what benches (bench/) and the repository's scripts/test use beyond the
 * package's public API (the NTS and discipline internals the micro-benchmarks time, and the test rigs), so
 * nothing outside the package imports its src/ or test/ by path (docs/ARCHITECTURE.md "Rules the build
 * enforces"). Sources only (the `source` condition): test/ is not built.
 */
export { MAXFREQ } from '../src/domain/discipline.ts';
export { NtsClientSession } from '../src/domain/nts-client-session.ts';
export { NtsCookieJar } from '../src/domain/nts-cookies.ts';
export { NtsResponder, type NtsSiv } from '../src/domain/nts-responder.ts';
export { nativeCookieAead, nativeNtsSiv } from '../src/io/native-cookie.ts';
export { ntsKeyExchange, type KeClientResult } from '../src/io/nts-ke-client.ts';
export { AesCmac, AesSiv, dbl } from '../src/protocol/aes-siv.ts';
export { AEAD_AES_SIV_CMAC_256 } from '../src/protocol/nts-ke.ts';
export {
  chronyQuery,
  medianOf,
  startChronyServer,
  writeFollowerConf,
  type ChronyServer,
} from './helpers/chrony.ts';
export { startTimesvcCli, timesvcBin } from './helpers/cli.ts';
export { createNetnsPair, type NetnsPair } from './helpers/netns.ts';
export { freePort, makeCertificate } from './helpers/nts.ts';
export { checkProbe, OffsetUpstream, Probe, type ProbeRecord } from './helpers/offset-upstream.ts';
export { startTxRig, txStampCounts } from './helpers/ptp-tx-rig.ts';
export { startupFigures, startupPair } from './helpers/startup-pair.ts';
export { startWebRig, type WebRig } from './helpers/web.ts';
