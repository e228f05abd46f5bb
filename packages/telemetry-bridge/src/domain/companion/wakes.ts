/**
 * The deadlines of a pure state machine: instead of starting timers, the machine records "wake me at t"
 * (monotonic ms from its injected Clock) and tells its owner the earliest one; the owner calls back when that
 * time has come and `run(now)` fires every deadline due by then, oldest first, then tells the earliest one
 * again (a wake-up that came early is simply asked for again). No timer, no I/O.
 */

export interface Wake {
  /** Forget this deadline (it never fires). */
  cancel(): void;
}

interface Entry {
  at: number;
  seq: number;
  fn: () => void;
  owner: object | undefined;
  done: boolean;
}

/** Upper bound of deadlines fired by one `run`: a deadline that keeps re-adding itself in the past stops here. */
const MAX_FIRED_PER_RUN = 10_000;

export class Wakes {
  #list: Entry[] = [];
  #seq = 0;
  #running = false;
  #told: number | undefined;
  readonly #onChange: (at: number | undefined) => void;

  /** `onChange(at)` hears the earliest deadline whenever it changes (`undefined`: nothing to wake for). */
  constructor(onChange: (at: number | undefined) => void) {
    this.#onChange = onChange;
  }

  /** Run `fn` once `run` is called with a time at or after `at`. `owner` groups deadlines for `cancelOwner`. */
  add(at: number, fn: () => void, owner?: object): Wake {
    const e: Entry = { at, seq: this.#seq++, fn, owner, done: false };
    this.#list.push(e);
    this.#tell();
    return {
      cancel: () => {
        if (e.done) return;
        e.done = true;
        this.#list = this.#list.filter((x) => x !== e);
        this.#tell();
      },
    };
  }

  /** Cancel every deadline added with this owner. */
  cancelOwner(owner: object): void {
    for (const e of this.#list) if (e.owner === owner) e.done = true;
    this.#list = this.#list.filter((e) => !e.done);
    this.#tell();
  }

  /** The earliest pending deadline. */
  get next(): number | undefined {
    let at: number | undefined;
    for (const e of this.#list) if (at === undefined || e.at < at) at = e.at;
    return at;
  }

  /** Fire every deadline due at `now`, in order of time then of creation (ones added meanwhile included). */
  run(now: number): void {
    this.#running = true;
    try {
      for (let fired = 0; fired < MAX_FIRED_PER_RUN; fired++) {
        let due: Entry | undefined;
        for (const e of this.#list)
          if (e.at <= now && (!due || e.at < due.at || (e.at === due.at && e.seq < due.seq))) due = e;
        if (!due) break;
        due.done = true;
        this.#list = this.#list.filter((x) => x !== due);
        due.fn();
      }
    } finally {
      this.#running = false;
      // Told even when unchanged: the owner's wake-up has been used (and may have come a little early).
      this.#tell(true);
    }
  }

  #tell(force = false): void {
    if (this.#running) return;
    const at = this.next;
    if (at === this.#told && !force) return;
    this.#told = at;
    this.#onChange(at);
  }
}
