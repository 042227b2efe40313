import { useEffect, useRef } from "react";

// ConfirmDialog is a modal <dialog> (focus trapped and Escape handled by the
// browser) asking to confirm a destructive action.
export function ConfirmDialog({
  open,
  title,
  message,
  confirmLabel,
  onConfirm,
  onCancel,
}: {
  open: boolean;
  title: string;
  message: string;
  confirmLabel: string;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const opener = useRef<Element | null>(null);
  const keep = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) {
      opener.current = document.activeElement;
      if (typeof d.showModal === "function") d.showModal();
      else d.setAttribute("open", "");
      // Keep, the harmless answer, has the focus (focused here, not by
      // autoFocus, which ran before the opener above was read).
      keep.current?.focus();
    } else if (!open && d.open) {
      if (typeof d.close === "function") d.close();
      else d.removeAttribute("open");
      // Back to the control that opened it, where a browser does not do
      // it itself (the focus was left on <body>, or on a button gone).
      const a = document.activeElement;
      if ((!a || a === document.body || d.contains(a)) && opener.current instanceof HTMLElement && opener.current.isConnected) opener.current.focus();
      opener.current = null;
    }
  }, [open]);
  return (
    <dialog
      ref={ref}
      data-testid="confirm-dialog"
      aria-labelledby="confirm-title"
      onCancel={(e) => {
        e.preventDefault();
        onCancel();
      }}
      className="m-auto max-w-sm rounded-lg border border-slate-300 bg-white p-4 text-slate-900 backdrop:bg-black/40 dark:border-slate-600 dark:bg-slate-900 dark:text-slate-100"
    >
      {open && (
        <div className="space-y-3">
          <h2 id="confirm-title" className="font-semibold">
            {title}
          </h2>
          <p className="text-sm">{message}</p>
          <div className="flex justify-end gap-2">
            <button type="button" className="btn" data-testid="confirm-cancel" onClick={onCancel} ref={keep}>
              Keep
            </button>
            <button type="button" className="btn btn-danger" data-testid="confirm-ok" onClick={onConfirm}>
              {confirmLabel}
            </button>
          </div>
        </div>
      )}
    </dialog>
  );
}
