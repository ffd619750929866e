import { rovingIndex } from '../src/model/roving';

describe('rovingIndex', () => {
  it('moves to the next or the previous item with the arrow keys, wrapping around', () => {
    expect(rovingIndex('ArrowRight', 0, 3)).toBe(1);
    expect(rovingIndex('ArrowDown', 2, 3)).toBe(0);
    expect(rovingIndex('ArrowLeft', 0, 3)).toBe(2);
    expect(rovingIndex('ArrowUp', 2, 3)).toBe(1);
  });

  it('goes to the first or the last item with Home and End', () => {
    expect(rovingIndex('Home', 2, 3)).toBe(0);
    expect(rovingIndex('End', 0, 3)).toBe(2);
  });

  it('leaves other keys, and an empty row, alone', () => {
    expect(rovingIndex('Enter', 1, 3)).toBeNull();
    expect(rovingIndex('a', 1, 3)).toBeNull();
    expect(rovingIndex('ArrowRight', 0, 0)).toBeNull();
  });
});
