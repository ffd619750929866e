/**
 * Arrow keys in a row of tabs or chips (WAI-ARIA's roving tabindex): one of them takes the Tab key,
 * the arrows move among them.
 */

/** The index the key moves to from `index` among `count` items, wrapping around; null for any other key. */
export function rovingIndex(key: string, index: number, count: number): number | null {
  if (count <= 0) {
    return null;
  }
  switch (key) {
    case 'ArrowRight':
    case 'ArrowDown':
      return (index + 1) % count;
    case 'ArrowLeft':
    case 'ArrowUp':
      return (index - 1 + count) % count;
    case 'Home':
      return 0;
    case 'End':
      return count - 1;
    default:
      return null;
  }
}
