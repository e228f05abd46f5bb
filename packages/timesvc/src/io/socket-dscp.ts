import type { Socket } from 'node:dgram';
import { socketFd } from './kernel-rx-timestamp.ts';
import { optionalAddon } from './native-addon.ts';

/**
 * DiffServ marking of a bound UDP socket (native/socket-tos.c, built at `npm ci`). Where the addon is missing
 * (not Linux, no compiler at install) nothing is marked and the caller says so in its status.
 */
interface TosAddon {
  setDscp(fd: number, dscp: number): boolean;
}

const addon = optionalAddon<TosAddon>('socket_tos');

/** Mark every datagram the socket sends with `dscp` (0..63); false when it could not be set. */
export function setSocketDscp(socket: Socket, dscp: number): boolean {
  const a = addon();
  const fd = socketFd(socket);
  if (!a || fd === undefined) return false;
  return a.setDscp(fd, dscp);
}
