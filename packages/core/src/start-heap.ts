/**
 * Imported first by each service's main.ts (`import '@broadcast-ops/core/start-heap'`, before the service
 * itself is loaded with a dynamic import): holds the young generation at its first size while the service
 * loads and starts; runService lets it grow again once the service has started (young-generation.ts,
 * docs/at-rest.md "Young generation"). Only a service's main imports this file.
 */
import { holdYoungGeneration } from './young-generation.ts';

holdYoungGeneration();
