import { buildNmea } from '../../src/protocol/nmea.ts';

/**
 * One second of a u-blox-like receiver: RMC, GGA, GSA and a GSV cycle naming the second `unixS` (the
 * sentence set of a NEO-M8T at 1 Hz; docs/gpsdo.md "NMEA 0183").
 */
export function nmeaSecond(unixS: number): string {
  const iso = new Date(unixS * 1000).toISOString();
  const t = iso.slice(11, 19).replace(/:/g, '') + '.00';
  const date = iso.slice(8, 10) + iso.slice(5, 7) + iso.slice(2, 4);
  return [
    `GPRMC,${t},A,5128.6740,N,00000.0900,W,0.01,,${date},,,A`,
    `GPGGA,${t},5128.6740,N,00000.0900,W,1,07,0.92,45.3,M,47.0,M,,`,
    'GPGSA,A,3,02,05,07,09,13,15,18,,,,,,1.61,0.92,1.32',
    'GPGSV,2,1,08,02,61,297,44,05,52,075,46,07,40,126,41,09,33,236,39',
    'GPGSV,2,2,08,13,25,018,36,15,22,119,40,18,14,307,33,20,06,243,',
  ]
    .map((b) => buildNmea(b) + '\r\n')
    .join('');
}

/** The `gpsdo` config of a serialpps receiver on pty `device` with the PPS fixture `ppsFile`. */
export function serialPpsConfig(device: string, ppsFile: string) {
  return {
    enabled: true,
    type: 'serialpps',
    serial_device: device,
    serial_baud: 9600,
    pps_device: ppsFile,
    fallback_after: '10s',
  } as const;
}
