import type { InputHTMLAttributes, ReactNode, TextareaHTMLAttributes } from "react";

// Field is a labelled control: the label (for=id), the control itself, and
// the error or help below it.
export function Field({ id, label, children, after }: { id: string; label: string; children: ReactNode; after?: ReactNode }) {
  return (
    <div>
      <label htmlFor={id} className="label">
        {label}
      </label>
      {children}
      {after}
    </div>
  );
}

// Alert is an error message announced to assistive technology; testId
// defaults to the contract's form-error.
export function Alert({ children, id, testId = "form-error", className = "" }: { children: ReactNode; id?: string; testId?: string; className?: string }) {
  return (
    <p role="alert" className={`error ${className}`} data-testid={testId} id={id}>
      {children}
    </p>
  );
}

export interface Option {
  value: string;
  label: string;
}

// SelectField is a labelled <select>.
export function SelectField({
  id,
  label,
  value,
  options,
  onChange,
  after,
  describedBy,
}: {
  id: string;
  label: string;
  value: string;
  options: Option[];
  onChange: (v: string) => void;
  after?: ReactNode;
  describedBy?: string;
}) {
  return (
    <Field id={id} label={label} after={after}>
      <select id={id} data-testid={id} className="input" value={value} aria-describedby={describedBy} onChange={(e) => onChange(e.target.value)}>
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </Field>
  );
}

// Section is a titled card region of a page.
export function Section({ id, title, children }: { id: string; title: string; children: ReactNode }) {
  return (
    <section aria-labelledby={id} className="card">
      <h2 id={id} className="mb-2 text-sm font-semibold">
        {title}
      </h2>
      {children}
    </section>
  );
}

// CheckboxField is a checkbox with its label after it.
export function CheckboxField({ id, label, checked, onChange }: { id: string; label: string; checked: boolean; onChange: (v: boolean) => void }) {
  return (
    <div className="flex items-center gap-2">
      <input id={id} data-testid={id} type="checkbox" checked={checked} onChange={(e) => onChange(e.target.checked)} />
      <label htmlFor={id} className="text-sm">
        {label}
      </label>
    </div>
  );
}

type InputAttrs = Omit<InputHTMLAttributes<HTMLInputElement>, "id" | "value" | "onChange">;
type TextAreaAttrs = Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "id" | "value" | "onChange">;

// InputField is a labelled text input whose data-testid is its id.
export function InputField({ id, label, value, onChange, after, className = "", ...rest }: { id: string; label: string; value: string; onChange: (v: string) => void; after?: ReactNode } & InputAttrs) {
  return (
    <Field id={id} label={label} after={after}>
      <input id={id} data-testid={id} className={`input ${className}`} value={value} onChange={(e) => onChange(e.target.value)} {...rest} />
    </Field>
  );
}

// TextAreaField is a labelled textarea whose data-testid is its id.
export function TextAreaField({ id, label, value, onChange, after, className = "", ...rest }: { id: string; label: string; value: string; onChange: (v: string) => void; after?: ReactNode } & TextAreaAttrs) {
  return (
    <Field id={id} label={label} after={after}>
      <textarea id={id} data-testid={id} className={`input ${className}`} value={value} onChange={(e) => onChange(e.target.value)} {...rest} />
    </Field>
  );
}

// PageHeader is a page's title with its main action beside it.
export function PageHeader({ id, title, children }: { id: string; title: string; children?: ReactNode }) {
  return (
    <div className="flex flex-wrap items-center gap-2">
      <h1 id={id} className="mr-auto text-xl font-semibold">
        {title}
      </h1>
      {children}
    </div>
  );
}
