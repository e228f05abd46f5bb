/**
 * Imported first by each service's main.ts (`import '@broadcast-ops/core/start-heap'`, before the service
 * itself is loaded with dynamic imports): holds the young generation at its first size and TurboFan off
 * while the service loads and starts; runService sets V8's defaults back once the service has started
 * (start-v8.ts, docs/at-rest.md "Young generation"). Only a service's main imports this file.
 */
import { holdStartSettings } from './start-v8.ts';

holdStartSettings();
