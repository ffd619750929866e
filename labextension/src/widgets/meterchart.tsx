/**
 * GPU-hours over the last days, stacked by team, as an SVG bar chart.
 */

import * as React from 'react';

import { E31Api, errorText } from '../model/api';
import { dayMonth, formatCost, formatHours } from '../model/format';
import { heldUsedWords } from '../model/gpuuse';
import { IMeterSeries, IUsedHours, loadMeterSeries, niceCeiling } from '../model/meter';
import { teamColor } from './common';

export const METER_DAYS = 14;
/** The chart reloads at most this often while shown (the jobs poll drives it). */
const RELOAD_MS = 15000;

export function MeterView(props: { api: E31Api; version: number }): JSX.Element {
  const [series, setSeries] = React.useState<IMeterSeries | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const loadedAt = React.useRef(0);

  React.useEffect(() => {
    if (Date.now() - loadedAt.current < RELOAD_MS && series) {
      return;
    }
    let cancelled = false;
    loadedAt.current = Date.now();
    loadMeterSeries(props.api, new Date(), METER_DAYS).then(
      s => {
        if (!cancelled) {
          setSeries(s);
          setError(null);
        }
      },
      e => !cancelled && setError(errorText(e))
    );
    return () => {
      cancelled = true;
    };
  }, [props.version]);

  if (error) {
    return <div className="e31-Error">{error}</div>;
  }
  if (!series) {
    return <div className="e31-Empty">Loading the meter…</div>;
  }
  return (
    <div className="e31-Meter">
      <div className="e31-Meter-total">
        <span className="e31-Meter-big">{formatHours(series.totalHours)}</span> GPU-hours in the last {METER_DAYS} days
        {series.totalCost ? (
          <span className="e31-Meter-cost"> · {formatCost(series.totalCost, series.currency)}</span>
        ) : null}
        {series.usedReported && series.totalHours > 0 ? (
          <span className="e31-Meter-used"> · {usedWords(series.totalUsed)}</span>
        ) : null}
      </div>
      <MeterChart series={series} />
      {series.teams.length ? (
        <ul className="e31-Legend">
          {series.teams.map((team, i) => (
            <li key={team}>
              <span className="e31-Legend-swatch" style={{ background: teamColor(i) }} />
              <span className="e31-Legend-team">{team}</span>
              <span className="e31-Legend-hours">
                {series.usedReported
                  ? teamHeldUsed(series.totalsByTeam[team], series.usedByTeam[team])
                  : `${formatHours(series.totalsByTeam[team])} GPU-h`}
              </span>
            </li>
          ))}
        </ul>
      ) : (
        <div className="e31-Empty">No GPU time used in these days. Waiting in the queue is free.</div>
      )}
      {series.usedReported && series.totalUsed.missing && series.usedWhyAbsent ? (
        <p className="e31-Meter-whyAbsent e31-Muted">Used GPU-hours not measured: {series.usedWhyAbsent}</p>
      ) : null}
    </div>
  );
}

/** "4.10 used", "used: not measured", "4.10 used where measured". */
function usedWords(used: IUsedHours): string {
  if (used.hours === null) {
    return 'used: not measured';
  }
  return `${formatHours(used.hours)} used${used.missing ? ' where measured' : ''}`;
}

/** "12.0 GPU-h held, 4.10 used": a team's held against used GPU-hours. */
function teamHeldUsed(held: number, used: IUsedHours | undefined): string {
  const sum = used ?? { hours: null, missing: true };
  return heldUsedWords(held, sum.hours, sum.missing);
}

/** The chart's height and margins, in CSS pixels (the SVG is drawn at its real width). */
const CHART = { height: 170, left: 44, right: 6, top: 22, bottom: 22 };
/** About how wide a date label is ("30 Dec") at the axis font size, with a gap. */
const DATE_LABEL_PX = 44;

export function MeterChart(props: { series: IMeterSeries }): JSX.Element {
  const { series } = props;
  const [box, width] = useWidth<HTMLDivElement>(260);
  const { height, left, right, top, bottom } = CHART;
  const plotH = height - bottom - top;
  const max = niceCeiling(series.maxDay);
  const slot = (width - left - right) / series.days.length;
  const barW = Math.max(3, slot * 0.68);
  const y = (h: number) => top + plotH - (h / max) * plotH;
  const every = Math.max(1, Math.ceil(DATE_LABEL_PX / slot));
  return (
    <div ref={box} className="e31-MeterChart-box">
      <svg
        className="e31-MeterChart"
        width={width}
        height={height}
        viewBox={`0 0 ${width} ${height}`}
        role="img"
        aria-label={`GPU-hours per day for the last ${series.days.length} days, by team`}
      >
        <text className="e31-MeterChart-unit" x={0} y={11}>
          GPU-h
        </text>
        {[0, max / 2, max].map(t => (
          <g key={t}>
            <line className="e31-MeterChart-grid" x1={left} x2={width - right} y1={y(t)} y2={y(t)} />
            <text className="e31-MeterChart-axis" x={left - 5} y={y(t) + 4} textAnchor="end">
              {axisLabel(t)}
            </text>
          </g>
        ))}
        {series.days.map((day, d) => {
          const x = left + d * slot + (slot - barW) / 2;
          const labelled = (series.days.length - 1 - d) % every === 0;
          return (
            <g key={day.date} className="e31-MeterChart-day" data-date={day.date}>
              <title>{dayTitle(series, d)}</title>
              <DayBars series={series} day={d} x={x} width={barW} y={y} />
              {labelled ? (
                <text
                  className="e31-MeterChart-axis"
                  x={Math.min(x + barW / 2, width - DATE_LABEL_PX / 2)}
                  y={height - 6}
                  textAnchor="middle"
                >
                  {dayMonth(day.date)}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
    </div>
  );
}

/** One day's bar, stacked by team. */
function DayBars(props: {
  series: IMeterSeries;
  day: number;
  x: number;
  width: number;
  y: (hours: number) => number;
}): JSX.Element {
  const { series, day, x, width, y } = props;
  let base = 0;
  const rects = series.teams.map((team, i) => {
    const h = series.hours[day][team] ?? 0;
    if (!h) {
      return null;
    }
    const top = y(base + h);
    const rect = (
      <rect key={team} x={x} width={width} y={top} height={Math.max(1, y(base) - top)} fill={teamColor(i)} />
    );
    base += h;
    return rect;
  });
  return <>{rects}</>;
}

/** A day's tooltip: "3 Dec: 4.10 GPU-h", then each team's hours on a line. */
function dayTitle(series: IMeterSeries, d: number): string {
  const hours = series.hours[d];
  const total = Object.values(hours).reduce((a, b) => a + b, 0);
  const teams = series.teams.filter(t => hours[t]).map(t => `\n${t}: ${formatHours(hours[t])} GPU-h`);
  return `${dayMonth(series.days[d].date)}: ${formatHours(total)} GPU-h${teams.join('')}`;
}

/** The width of an element, in CSS pixels, kept up to date as it is resized; `initial` until measured. */
function useWidth<T extends HTMLElement>(initial: number): [React.RefObject<T>, number] {
  const ref = React.useRef<T>(null);
  const [width, setWidth] = React.useState(initial);
  React.useEffect(() => {
    const element = ref.current;
    if (!element || typeof ResizeObserver === 'undefined') {
      return;
    }
    const observer = new ResizeObserver(() => {
      const measured = Math.floor(element.clientWidth);
      if (measured > 0) {
        setWidth(measured);
      }
    });
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  return [ref, width];
}

/** Axis values with just enough digits: 0, 0.0025, 0.005; 0, 5, 10. */
function axisLabel(value: number): string {
  return value === 0 ? '0' : String(Number(value.toPrecision(2)));
}
