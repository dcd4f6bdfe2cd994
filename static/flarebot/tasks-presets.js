// The schedule presets of the task form. Each preset stands for one cron expression, and that
// expression is what is saved: the API knows only cron and one-offs (PROTOCOL.md "Scheduled
// tasks"). An expression the server gives back in its normal form (no leading zeros, single
// spaces, names and @nicknames as numbers) that is a preset's opens as that preset. Wording a
// schedule for the list is the server's (`schedule_text`), not this module's.

// Steps that divide the day evenly, so that "every N hours" is what the expression does.
export const HOURS = [1, 2, 3, 4, 6, 8, 12];
// Monday first, as a week reads; cron numbers Sunday 0 (or 7).
export const DAYS = [[1, "Monday"], [2, "Tuesday"], [3, "Wednesday"], [4, "Thursday"], [5, "Friday"], [6, "Saturday"], [0, "Sunday"]];
export const PRESETS = ["daily", "weekdays", "weekly", "hours"];

/** The cron expression of a preset: `time` is "HH:MM" (for daily, weekdays, weekly), `day` 0-6, `hours` one of HOURS. */
export function presetCron({ preset, time, day, hours }) {
  if (preset === "hours") return hours === 1 ? "0 * * * *" : `0 */${hours} * * *`;
  const match = /^(\d{2}):(\d{2})/.exec(time || "");
  if (!match) return null;
  const at = `${Number(match[2])} ${Number(match[1])}`;
  if (preset === "daily") return `${at} * * *`;
  if (preset === "weekdays") return `${at} * * 1-5`;
  if (preset === "weekly") return `${at} * * ${day}`;
  return null;
}

/** The preset a normalized cron expression is, with its fields; null when it is none. */
export function presetOf(expression) {
  let match = /^(\d{1,2}) (\d{1,2}) \* \* (\*|1-5|[0-7])$/.exec(expression);
  if (match) {
    const time = `${match[2].padStart(2, "0")}:${match[1].padStart(2, "0")}`;
    if (match[3] === "*") return { preset: "daily", time };
    if (match[3] === "1-5") return { preset: "weekdays", time };
    return { preset: "weekly", time, day: Number(match[3]) % 7 };
  }
  match = /^0 (?:\*|\*\/(\d+)) \* \* \*$/.exec(expression);
  const hours = match ? Number(match[1] || 1) : 0;
  return HOURS.includes(hours) ? { preset: "hours", hours } : null;
}
