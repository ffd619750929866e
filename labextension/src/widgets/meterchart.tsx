/**
 * GPU-hours over the last days, stacked by team, as an SVG bar chart.
 */

import * as React from 'react';

import { E31Api, errorText } from '../model/api';
import { formatCost, formatHours } from '../model/format';
import { IMeterSeries, loadMeterSeries, niceCeiling } from '../model/meter';
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
      </div>
      <MeterChart series={series} />
      {series.teams.length ? (
        <ul className="e31-Legend">
          {series.teams.map((team, i) => (
            <li key={team}>
              <span className="e31-Legend-swatch" style={{ background: teamColor(i) }} />
              <span className="e31-Legend-team">{team}</span>
              <span className="e31-Legend-hours">{formatHours(series.totalsByTeam[team])} GPU-h</span>
            </li>
          ))}
        </ul>
      ) : (
        <div className="e31-Empty">No GPU time used in these days. Waiting in the queue is free.</div>
      )}
    </div>
  );
}

export function MeterChart(props: { series: IMeterSeries }): JSX.Element {
  const { series } = props;
  const width = 240;
  const height = 140;
  const left = 30;
  const bottom = 16;
  const top = 6;
  const plotH = height - bottom - top;
  const plotW = width - left - 4;
  const max = niceCeiling(series.maxDay);
  const slot = plotW / series.days.length;
  const barW = Math.max(4, slot * 0.68);
  const y = (h: number) => top + plotH - (h / max) * plotH;
  const ticks = [0, max / 2, max];
  return (
    <svg
      className="e31-MeterChart"
      viewBox={`0 0 ${width} ${height}`}
      role="img"
      aria-label={`GPU-hours per day for the last ${series.days.length} days, by team`}
    >
      {ticks.map(t => (
        <g key={t}>
          <line className="e31-MeterChart-grid" x1={left} x2={width - 2} y1={y(t)} y2={y(t)} />
          <text className="e31-MeterChart-axis" x={left - 4} y={y(t) + 3} textAnchor="end">
            {axisLabel(t)}
          </text>
        </g>
      ))}
      {series.days.map((day, d) => {
        let base = 0;
        const x = left + d * slot + (slot - barW) / 2;
        const total = Object.values(series.hours[d]).reduce((a, b) => a + b, 0);
        return (
          <g key={day.date} className="e31-MeterChart-day" data-date={day.date}>
            <title>
              {`${day.date}: ${formatHours(total)} GPU-h` +
                series.teams
                  .filter(t => series.hours[d][t])
                  .map(t => `\n${t}: ${formatHours(series.hours[d][t])}`)
                  .join('')}
            </title>
            {series.teams.map((team, i) => {
              const h = series.hours[d][team] ?? 0;
              if (!h) {
                return null;
              }
              const rect = (
                <rect
                  key={team}
                  x={x}
                  width={barW}
                  y={y(base + h)}
                  height={Math.max(1, y(base) - y(base + h))}
                  fill={teamColor(i)}
                />
              );
              base += h;
              return rect;
            })}
            {(series.days.length - 1 - d) % 2 !== 0 ? null : (
              <text className="e31-MeterChart-axis" x={x + barW / 2} y={height - 5} textAnchor="middle">
                {day.label.split(' ')[1]}
              </text>
            )}
          </g>
        );
      })}
    </svg>
  );
}

/** Axis values with just enough digits: 0, 0.0025, 0.005; 0, 5, 10. */
function axisLabel(value: number): string {
  return value === 0 ? '0' : String(Number(value.toPrecision(2)));
}
