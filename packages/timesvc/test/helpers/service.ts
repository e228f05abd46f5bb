import { silentLogger } from '@broadcast-ops/core';
import { configSchema, type TimesvcConfig } from '../../src/config.ts';
import { createTimesvc, type TimesvcOptions, type TimesvcService } from '../../src/io/service.ts';

/** A timesvc on loopback ephemeral ports (NTP on 127.0.0.1 and ::1, web on 127.0.0.1:0). */
export async function startService(
  ntp: Record<string, unknown>,
  options: TimesvcOptions = {},
): Promise<{ service: TimesvcService; port: number; config: TimesvcConfig }> {
  const config = configSchema.parse({
    ntp: { port: 0, interface: '', ...ntp },
    web: { port: 0, bind_address: '127.0.0.1' },
  });
  const service = await createTimesvc(config, silentLogger(), options);
  await service.start();
  await service.app.listen({ port: 0, host: '127.0.0.1' });
  const port = service.server()?.addresses[0]?.port ?? 0;
  return { service, port, config };
}
