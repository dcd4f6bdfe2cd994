// Times of the Tasks section: zones, wall clocks in a zone and back, instants shown with
// their zone named. A task's times are shown in its own zone (a one-off's too, the zone it was
// written in); the browser's own time is put beside a one-off when the zones differ.

export const BROWSER_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

/** UTC first, then the browser's zone and every zone it knows. */
export function zones() {
  let names = [];
  try {
    names = Intl.supportedValuesOf("timeZone");
  } catch {
    names = [];
  }
  return Array.from(new Set(["UTC", BROWSER_ZONE, ...names])).sort((a, b) => (a === "UTC" ? -1 : b === "UTC" ? 1 : a.localeCompare(b)));
}

// The wall clock of an instant in a zone, as milliseconds of the same fields in UTC.
function wallOf(ms, zone) {
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
  const p = Object.fromEntries(format.formatToParts(new Date(ms)).map((part) => [part.type, part.value]));
  return Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute), Number(p.second));
}

/** The instant whose wall clock in `zone` is the datetime-local value `text` (YYYY-MM-DDTHH:MM[:SS]). */
export function instantOf(text, zone) {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(text);
  if (!m) return null;
  const wall = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6] || 0));
  let guess = wall - (wallOf(wall, zone) - wall);
  guess = wall - (wallOf(guess, zone) - guess);
  return new Date(guess).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function localInput(iso, zone) {
  const wall = new Date(wallOf(Date.parse(iso), zone)).toISOString();
  return wall.slice(0, 19);
}

// A 24-hour clock, as the server words schedules ("Weekdays at 18:45"); the rest in the browser's locale.
function formatIn(iso, zone) {
  return new Intl.DateTimeFormat(undefined, {
    timeZone: zone, weekday: "short", year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short",
  }).format(new Date(iso));
}

/** A task's own zone: a repeating task's, or the one a one-off was written in. */
export function zoneOf(task) {
  return task.schedule.timezone || "UTC";
}

export function timeNode(iso, zone) {
  const node = document.createElement("time");
  node.dateTime = iso;
  node.textContent = formatIn(iso, zone);
  return node;
}

/** The instant in the browser's zone, when that is not `zone`: "Your time: …"; null otherwise. */
export function yourTime(iso, zone) {
  if (zone === BROWSER_ZONE) return null;
  const node = document.createElement("span");
  node.className = "your-time";
  node.append("Your time: ", timeNode(iso, BROWSER_ZONE));
  return node;
}
