//! Derive macros for Engram.
//!
//! - `#[derive(Persistent)]` generates an `unsafe impl engram::Persistent`
//!   for a struct whose fields are all `Persistent`: its stable type name
//!   (module path and ident, or `#[engram(name = "...")]`), the offsets of its
//!   pool pointers (from each field's own offsets, shifted by `offset_of!`),
//!   and a field signature for the layout hash, so a program whose struct
//!   changed is refused by a pool that recorded the old layout. Enums and
//!   unions are rejected: not every bit pattern of them is a valid value.
//! - `#[derive(Persist)]` makes an ordinary Rust struct storable in a
//!   `PTVar`: it generates a companion persistent struct (`FooP`, the pool
//!   form of `Foo`, itself `Persistent`) and `impl engram::stm::Persist for
//!   Foo` copying each field at commit. Both derives share the `Persistent`
//!   expansion (`persistent_impl`).

use proc_macro::TokenStream;
use proc_macro2::{Group, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    parse_macro_input, parse_quote, parse_quote_spanned, Attribute, Data, DeriveInput, Fields, GenericParam, Generics, Ident, LitStr, Path,
    Token, Type, WherePredicate,
};

/// Derives `engram::Persistent`. The struct must also be `Copy`.
///
/// For a struct with named fields it also implements
/// `engram::stm::TFields`, which `engram::field!` uses to tell the kind of
/// a `PTField`: a field marked `#[immutable]` gets a read-only handle
/// (`ImmutableRef`, read without a read-set entry, no write), the others a
/// `FieldRef`. `#[immutable]` is refused on a tuple struct's fields.
#[proc_macro_derive(Persistent, attributes(engram, immutable))]
pub fn derive_persistent(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// One field of a struct as the `Persistent` expansion sees it.
struct Member {
    /// How to name it: `x` or `0`.
    access: TokenStream2,
    /// Its label in the layout signature.
    label: String,
    /// Its (Persistent) type.
    ty: Type,
    /// `#[cfg]` attributes to repeat wherever the field is named.
    cfgs: Vec<Attribute>,
}

fn members_of(fields: &Fields) -> Vec<(TokenStream2, String, &syn::Field)> {
    match fields {
        Fields::Named(n) => n
            .named
            .iter()
            .map(|f| {
                let id = f.ident.clone().expect("named field");
                (quote!(#id), id.to_string(), f)
            })
            .collect(),
        Fields::Unnamed(u) => u
            .unnamed
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let idx = syn::Index::from(i);
                (quote!(#idx), i.to_string(), f)
            })
            .collect(),
        Fields::Unit => Vec::new(),
    }
}

fn expand(mut input: DeriveInput) -> syn::Result<TokenStream2> {
    let ident = input.ident.clone();
    let fields = match &input.data {
        Data::Struct(s) => s.fields.clone(),
        _ => {
            return Err(syn::Error::new_spanned(
                &input.ident,
                "Persistent can be derived for structs only (enum and union bit patterns are not all valid)",
            ))
        }
    };
    let mut name_override = None;
    for attr in &input.attrs {
        if attr.path().is_ident("engram") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    name_override = Some(meta.value()?.parse::<LitStr>()?);
                    Ok(())
                } else {
                    Err(meta.error("expected `name = \"...\"`"))
                }
            })?;
        }
    }
    let type_params: Vec<_> =
        input.generics.params.iter().filter_map(|p| if let GenericParam::Type(t) = p { Some(t.ident.clone()) } else { None }).collect();
    let plain_generics = input.generics.clone();
    for p in input.generics.params.iter_mut() {
        if let GenericParam::Type(t) = p {
            t.bounds.push(syn::parse_quote!(::engram::Persistent));
        }
    }
    let members: Vec<Member> =
        members_of(&fields).into_iter().map(|(access, label, f)| Member { access, label, ty: f.ty.clone(), cfgs: Vec::new() }).collect();
    let base_name = match name_override {
        Some(l) => quote!(#l),
        None => quote!(concat!(module_path!(), "::", stringify!(#ident))),
    };
    let name_params = type_params.iter().map(|t| quote!(<#t as ::engram::Persistent>::type_name())).collect();
    let kinds = field_kinds(&input, &plain_generics, &fields)?;
    let imp = persistent_impl(&ident, &input.generics, &members, base_name, name_params, true);
    Ok(quote!(#imp #kinds))
}

/// The `TFields` companion of a struct with named fields: a struct with the
/// same field names, each of type `Mutable<F>` or (`#[immutable]`)
/// `Immutable<F>`, with the struct's and the fields' visibility, and the
/// impl naming it. Nothing for tuple and unit structs.
fn field_kinds(input: &DeriveInput, plain: &Generics, fields: &Fields) -> syn::Result<TokenStream2> {
    let is_immutable = |f: &syn::Field| f.attrs.iter().any(|a| a.path().is_ident("immutable"));
    let Fields::Named(named) = fields else {
        if let Some(f) = fields.iter().find(|f| is_immutable(f)) {
            return Err(syn::Error::new_spanned(&f.ty, "#[immutable] needs a named field (reached with engram::field!)"));
        }
        return Ok(quote!());
    };
    let ident = &input.ident;
    let vis = &input.vis;
    let companion = format_ident!("__EngramFieldsOf{}", ident);
    let members = named.named.iter().map(|f| {
        let (fid, fvis, ty) = (&f.ident, &f.vis, &f.ty);
        let kind = if is_immutable(f) { quote!(Immutable) } else { quote!(Mutable) };
        let cfgs = f.attrs.iter().filter(|a| a.path().is_ident("cfg"));
        quote!(#(#cfgs)* #fvis #fid: ::engram::stm::#kind<#ty>)
    });
    let (_, plain_ty_g, plain_where) = plain.split_for_impl();
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    let params = &plain.params;
    Ok(quote! {
        #[doc(hidden)]
        #[allow(non_camel_case_types, dead_code, missing_docs)]
        #vis struct #companion <#params> #plain_where { #(#members,)* }
        impl #impl_g ::engram::stm::TFields for #ident #ty_g #where_g {
            type Fields = #companion #plain_ty_g;
        }
    })
}

/// The `unsafe impl ::engram::Persistent` for struct `ident` (and a function
/// asserting every field type is `Persistent`, for a clear error).
///
/// `generics` carries every bound the impl needs; `base_name` is an
/// expression giving the stable type name (`&str`); `name_params` are
/// `String` expressions appended as `<a,b>` to it (nothing when empty).
/// `assert_fields`: also emit the assertion function (not needed when the
/// field types are `Persistent` by construction).
fn persistent_impl(
    ident: &Ident,
    generics: &Generics,
    members: &[Member],
    base_name: TokenStream2,
    name_params: Vec<TokenStream2>,
    assert_fields: bool,
) -> TokenStream2 {
    let (impl_g, ty_g, where_g) = generics.split_for_impl();
    let type_name_body = if name_params.is_empty() {
        quote!(::std::string::String::from(#base_name))
    } else {
        quote!({
            let params: ::std::vec::Vec<::std::string::String> = vec![#(#name_params),*];
            format!("{}<{}>", #base_name, params.join(","))
        })
    };
    let ptr_calls = members.iter().map(|Member { access: m, ty, cfgs, .. }| {
        quote!(#(#cfgs)* <#ty as ::engram::Persistent>::pointer_offsets(out, at + ::core::mem::offset_of!(Self, #m) as u32);)
    });
    let has_ptr_parts =
        members.iter().map(|Member { ty, cfgs, .. }| quote!(#(#cfgs)* { has = has || <#ty as ::engram::Persistent>::HAS_POINTERS; }));
    let sig_parts = members.iter().map(|Member { access: m, label, ty, cfgs }| {
        quote!(#(#cfgs)* sig.push_str(&format!("{}:{}@{};", #label, <#ty as ::engram::Persistent>::signature(), ::core::mem::offset_of!(Self, #m)));)
    });
    let assert_fn = format_ident!("__engram_assert_fields_{}", ident);
    let field_checks = members.iter().map(|Member { ty, cfgs, .. }| quote!(#(#cfgs)* is_persistent::<#ty>();));
    let assertion = if assert_fields {
        quote! {
            #[allow(non_snake_case, dead_code)]
            fn #assert_fn #impl_g () #where_g {
                fn is_persistent<X: ::engram::Persistent>() {}
                #(#field_checks)*
            }
        }
    } else {
        quote!()
    };
    quote! {
        // SAFETY: every field is Persistent (checked by the bounds below), so
        // every bit pattern of each field is valid and its pointers are
        // reported; the struct adds no pointers of its own.
        unsafe impl #impl_g ::engram::Persistent for #ident #ty_g #where_g {
            const HAS_POINTERS: bool = {
                #[allow(unused_mut)]
                let mut has = false;
                #(#has_ptr_parts)*
                has
            };
            fn type_name() -> ::std::string::String { #type_name_body }
            fn pointer_offsets(out: &mut ::std::vec::Vec<u32>, at: u32) {
                let _ = (&out, at);
                #(#ptr_calls)*
            }
            fn signature() -> ::std::string::String {
                let mut sig = format!("{}{{", <Self as ::engram::Persistent>::type_name());
                #(#sig_parts)*
                sig.push('}');
                sig
            }
        }
        #assertion
    }
}

/// Derives `engram::stm::Persist` for a struct, so ordinary Rust values of it
/// can be written into a `PTVar` (they are copied into the pool at commit).
///
/// For `struct Foo { .. }` it generates:
///
/// - a companion struct `FooP`, the pool form of `Foo`: `#[repr(C)]`, with the
///   same fields (all `pub`, in the same order, tuple fields for a tuple
///   struct), each of type `<FieldTy as Persist>::P` (`String` → `PStr`,
///   `Vec<T>` → `PSlice<T::P>`, `Box<T>`/`Rc<T>`/`Arc<T>` → `PPtr<T::P>`,
///   `Option<T>` → `POption<T::P>`, a nested derived struct `Bar` → `BarP`,
///   integers and floats → themselves, `bool` → `u8`), the visibility of
///   `Foo`, and impls of `Clone`, `Copy`, `Default` (all zero: null
///   pointers, `None`, zero numbers), `engram::Persistent` (stable name
///   `module_path!()::FooP`) and `Persist` (already in the pool: copied as
///   is, so a `PTVar<FooP>` works too);
/// - `impl Persist for Foo { type P = FooP; .. }`: `persist` copies the fields
///   in order (an `Rc`/`Arc` reached twice is copied once, so recursive and
///   shared structures keep their shape), and `plain` returns the companion
///   without allocating when every field is plain (numbers, `bool`, pool
///   pointers), so such a struct costs no pool object when written.
///
/// A recursive struct works through an indirection: `next: Option<Rc<Node>>`
/// becomes `next: POption<PPtr<NodeP>>`. A generic struct `Foo<T>` gets the
/// bounds `T: Persist` for each type parameter and `FieldTy: Persist` for
/// each field type that mentions one (except fields mentioning `Foo` itself,
/// where that bound would be cyclic), on the companion and on every impl;
/// the companion's pool name is `FooP<{T::P's name},...>`, so each
/// instantiation is its own pool type.
///
/// Options, in `#[persist(...)]` on the struct:
///
/// - `name = "Ident"`: the companion's Rust name (default: the struct's name
///   followed by `P`);
/// - `type_name = "..."`: its stable name in the pool's type table (default:
///   `module_path!()` + `"::"` + the companion's name). The pool records the
///   layout under this name, so keep it when moving the type between modules;
/// - `bound = "T: Persist, ..."`: replaces the generated bounds (for mutually
///   recursive generic types, where the generated ones would be cyclic); it
///   must still imply `T: Persist` for each type parameter;
/// - `derive(Debug, PartialEq, ...)`: extra derives for the companion
///   (`Clone`, `Copy` and `Default` are always implemented and are skipped).
///
/// Limitations: structs only (an enum has no generated pool form: implement
/// `Persist` by hand, e.g. with a tag and an `Option`-like layout); no
/// lifetime parameters (persisted values are `'static`); a value written
/// directly into a `PTVar` must have a companion of at most 40 bytes with
/// alignment at most 8 (put bigger ones behind a `Box` or `Rc`); companions
/// are immutable snapshots: changing a `Foo` after commit does not change the
/// pool.
///
/// ```ignore
/// use engram::stm::{Persist, PTVar};
/// use engram::{CreateOptions, Durability, Pool};
/// use std::rc::Rc;
///
/// #[derive(Persist)]
/// struct Account {
///     owner: String,
///     balance: u64,
///     tags: Vec<String>,
///     next: Option<Rc<Account>>,
/// }
/// // generated: #[repr(C)] struct AccountP { pub owner: PStr, pub balance: u64,
/// //            pub tags: PSlice<PStr>, pub next: POption<PPtr<AccountP>> }
///
/// # let path = std::env::temp_dir().join("engram-persist-doc.pool");
/// let pool = Pool::create(&path, CreateOptions::new("bank").durability(Durability::Process))?;
/// let head: PTVar<Account> = pool.root("head", || Account {
///     owner: String::new(), balance: 0, tags: vec![], next: None,
/// })?;
/// let bob = Rc::new(Account { owner: "bob".into(), balance: 5, tags: vec![], next: None });
/// pool.atomically(|tx| {
///     tx.write(&head, Account { owner: "alice".into(), balance: 10, tags: vec!["vip".into()], next: Some(bob.clone()) })
/// })?;
/// let (owner, balance) = pool.atomically(|tx| {
///     let a: AccountP = tx.read(&head)?;
///     Ok((a.owner.as_str(tx)?.to_string(), a.balance))
/// })?;
/// assert_eq!((owner.as_str(), balance), ("alice", 10));
/// // follow a pointer with the engine's transactions:
/// let next = pool.atomically(|tx| Ok(tx.read(&head)?.next.get()))?.unwrap();
/// let bob_p: AccountP = pool.txn(|tx| tx.read(next))?;
/// assert_eq!(bob_p.balance, 5);
/// # pool.close()?;
/// # Ok::<(), engram::Error>(())
/// ```
///
/// (This example is the test `rustdoc_example` in
/// `crates/engram/tests/persist_derive.rs`.)
#[proc_macro_derive(Persist, attributes(persist))]
pub fn derive_persist(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_persist(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// `#[persist(...)]` options.
#[derive(Default)]
struct PersistOpts {
    name: Option<Ident>,
    type_name: Option<LitStr>,
    bound: Option<Punctuated<WherePredicate, Token![,]>>,
    derives: Vec<Path>,
}

fn persist_opts(attrs: &[Attribute]) -> syn::Result<PersistOpts> {
    let mut o = PersistOpts::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("persist")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                let lit: LitStr = meta.value()?.parse()?;
                o.name = Some(lit.parse::<Ident>().map_err(|_| syn::Error::new_spanned(&lit, "`name` must be a Rust identifier"))?);
            } else if meta.path.is_ident("type_name") {
                let lit: LitStr = meta.value()?.parse()?;
                if lit.value().is_empty() {
                    return Err(syn::Error::new_spanned(&lit, "`type_name` must not be empty"));
                }
                o.type_name = Some(lit);
            } else if meta.path.is_ident("bound") {
                let lit: LitStr = meta.value()?.parse()?;
                o.bound = Some(lit.parse_with(Punctuated::parse_terminated)?);
            } else if meta.path.is_ident("derive") {
                meta.parse_nested_meta(|d| {
                    o.derives.push(d.path);
                    Ok(())
                })?;
            } else {
                return Err(meta.error(
                    "unknown `persist` option; expected `name = \"...\"`, `type_name = \"...\"`, `bound = \"...\"` or `derive(...)`",
                ));
            }
            Ok(())
        })?;
    }
    Ok(o)
}

/// Whether `ts` contains an identifier satisfying `f`, at any depth.
fn mentions(ts: TokenStream2, f: &dyn Fn(&Ident) -> bool) -> bool {
    ts.into_iter().any(|t| match t {
        TokenTree::Ident(i) => f(&i),
        TokenTree::Group(g) => mentions(g.stream(), f),
        _ => false,
    })
}

/// `ts` with every `Self` replaced by `with` (field types of the source
/// struct are spelled again inside the companion, where `Self` would be the
/// companion).
fn replace_self(ts: TokenStream2, with: &TokenStream2) -> TokenStream2 {
    ts.into_iter()
        .flat_map(|t| -> Vec<TokenTree> {
            match t {
                TokenTree::Ident(i) if i == "Self" => with.clone().into_iter().collect(),
                TokenTree::Group(g) => {
                    let mut n = Group::new(g.delimiter(), replace_self(g.stream(), with));
                    n.set_span(g.span());
                    vec![TokenTree::Group(n)]
                }
                other => vec![other],
            }
        })
        .collect()
}

/// The argument of `Option<X>` (`std::option::Option`, `core::option::Option`).
fn option_arg(ty: &Type) -> Option<&Type> {
    let Type::Path(tp) = ty else { return None };
    if tp.qself.is_some() {
        return None;
    }
    let names: Vec<String> = tp.path.segments.iter().map(|s| s.ident.to_string()).collect();
    let ok = match names.as_slice() {
        [o] => o == "Option" && tp.path.leading_colon.is_none(),
        [root, m, o] => (root == "std" || root == "core") && m == "option" && o == "Option",
        _ => false,
    };
    let before_last_plain = tp.path.segments.iter().rev().skip(1).all(|s| s.arguments.is_none());
    if !ok || !before_last_plain {
        return None;
    }
    match &tp.path.segments.last()?.arguments {
        syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match a.args.first()? {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        },
        _ => None,
    }
}

/// The companion's type for a field of type `ty`: `<ty as Persist>::P`,
/// except that `Option<X>` is spelled `POption<X's>` and `(A, B)`
/// `PPair<A's, B's>`, the types those impls give. Naming them directly keeps
/// the companion's `Sized` check from selecting the `Option` impl, whose
/// `X::P: Default` bound leads back to the companion for a recursive field
/// (`next: Option<Rc<Self>>`) and would be a cycle.
fn pool_type(ty: &Type) -> TokenStream2 {
    match ty {
        Type::Paren(p) => pool_type(&p.elem),
        Type::Group(g) => pool_type(&g.elem),
        Type::Tuple(t) if t.elems.len() == 2 => {
            let a = pool_type(&t.elems[0]);
            let b = pool_type(&t.elems[1]);
            quote_spanned!(ty.span()=> ::engram::stm::PPair<#a, #b>)
        }
        _ => match option_arg(ty) {
            Some(x) => {
                let x = pool_type(x);
                quote_spanned!(ty.span()=> ::engram::stm::POption<#x>)
            }
            None => quote_spanned!(ty.span()=> <#ty as ::engram::stm::Persist>::P),
        },
    }
}

/// The bounds a field of type `ty` needs, each with the source type it is
/// about: `ty: Persist`, following [`pool_type`] through `Option` (`X:
/// Persist` and `X's pool type: Default`) and pairs. (A bound `Option<X>:
/// Persist` itself would hide the impl from the generic code, which could
/// then no longer see that its `P` is the companion's `POption<..>`.)
fn field_bounds(ty: &Type, out: &mut Vec<(Type, WherePredicate)>) {
    match ty {
        Type::Paren(p) => field_bounds(&p.elem, out),
        Type::Group(g) => field_bounds(&g.elem, out),
        Type::Tuple(t) if t.elems.len() == 2 => {
            field_bounds(&t.elems[0], out);
            field_bounds(&t.elems[1], out);
        }
        _ => match option_arg(ty) {
            Some(x) => {
                field_bounds(x, out);
                let px = pool_type(x);
                out.push((x.clone(), parse_quote_spanned!(x.span()=> #px: ::core::default::Default)));
            }
            None => out.push((ty.clone(), parse_quote_spanned!(ty.span()=> #ty: ::engram::stm::Persist))),
        },
    }
}

fn expand_persist(input: DeriveInput) -> syn::Result<TokenStream2> {
    let ident = &input.ident;
    let fields = match &input.data {
        Data::Struct(s) => &s.fields,
        Data::Enum(e) => {
            let kw = e.enum_token;
            return Err(syn::Error::new_spanned(
                quote!(#kw #ident),
                "Persist can be derived for structs only; for enums, implement Persist by hand",
            ));
        }
        Data::Union(u) => {
            let kw = u.union_token;
            return Err(syn::Error::new_spanned(
                quote!(#kw #ident),
                "Persist can be derived for structs only; for unions, implement Persist by hand",
            ));
        }
    };
    let opts = persist_opts(&input.attrs)?;
    for f in fields.iter() {
        if let Some(a) = f.attrs.iter().find(|a| a.path().is_ident("persist")) {
            return Err(syn::Error::new_spanned(a, "`#[persist(...)]` goes on the struct; fields take no options"));
        }
    }
    for p in &input.generics.params {
        if let GenericParam::Lifetime(l) = p {
            return Err(syn::Error::new_spanned(
                l,
                "Persist cannot be derived for a struct with lifetime parameters (persisted values are 'static)",
            ));
        }
    }
    let vis = &input.vis;
    let companion = opts.name.clone().unwrap_or_else(|| format_ident!("{}P", ident));
    if companion == *ident {
        return Err(syn::Error::new_spanned(&companion, "the companion struct needs a name different from the struct's"));
    }

    let type_params: Vec<Ident> =
        input.generics.params.iter().filter_map(|p| if let GenericParam::Type(t) = p { Some(t.ident.clone()) } else { None }).collect();
    let (_, src_ty_g, _) = input.generics.split_for_impl();
    let self_ty = quote!(#ident #src_ty_g);

    // Field types with `Self` spelled out.
    let fields_info: Vec<(TokenStream2, String, &syn::Field, Type)> = members_of(fields)
        .into_iter()
        .map(|(access, label, f)| {
            let ty: Type = syn::parse2(replace_self(f.ty.to_token_stream(), &self_ty))?;
            Ok((access, label, f, ty))
        })
        .collect::<syn::Result<_>>()?;

    // Bounds shared by the companion and every impl, all in the where
    // clause (the parameters keep only their defaults).
    let mut generics = input.generics.clone();
    {
        let mut moved: Vec<WherePredicate> = Vec::new();
        for p in generics.params.iter_mut() {
            if let GenericParam::Type(t) = p {
                if !t.bounds.is_empty() {
                    let (id, b) = (&t.ident, &t.bounds);
                    moved.push(parse_quote!(#id: #b));
                    t.bounds.clear();
                    t.colon_token = None;
                }
            }
        }
        let wc = generics.make_where_clause();
        let user: Vec<WherePredicate> = std::mem::take(&mut wc.predicates).into_iter().collect();
        wc.predicates.extend(moved);
        wc.predicates.extend(user);
        match &opts.bound {
            Some(b) => wc.predicates.extend(b.iter().cloned()),
            None => {
                for t in &type_params {
                    wc.predicates.push(parse_quote!(#t: ::engram::stm::Persist));
                }
                let mut bounds = Vec::new();
                for (_, _, _, ty) in &fields_info {
                    field_bounds(ty, &mut bounds);
                }
                for (about, pred) in bounds {
                    let generic = mentions(about.to_token_stream(), &|i| type_params.iter().any(|t| i == t));
                    let recursive = mentions(about.to_token_stream(), &|i| i == ident);
                    if generic && !recursive {
                        wc.predicates.push(pred);
                    }
                }
            }
        }
    }
    let (impl_g, ty_g, where_g) = generics.split_for_impl();
    let def_params = &generics.params;
    let def_lt = generics.lt_token;
    let def_gt = generics.gt_token;

    let p_ty = pool_type;
    let cfgs_of = |f: &syn::Field| -> Vec<Attribute> { f.attrs.iter().filter(|a| a.path().is_ident("cfg")).cloned().collect() };

    // The companion's fields.
    let def_fields = fields_info.iter().map(|(_, label, f, ty)| {
        let docs: Vec<&Attribute> = f.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
        let doc = if docs.is_empty() {
            let d = format!("Pool form of field `{}`.", label);
            quote!(#[doc = #d])
        } else {
            quote!(#(#docs)*)
        };
        let cfgs = cfgs_of(f);
        let pty = p_ty(ty);
        match &f.ident {
            Some(id) => quote!(#doc #(#cfgs)* pub #id: #pty),
            None => quote!(#doc #(#cfgs)* pub #pty),
        }
    });
    let struct_doc = format!("Pool form of [`{}`], generated by `#[derive(Persist)]`.", ident);
    let derives: Vec<&Path> = opts.derives.iter().filter(|p| !["Clone", "Copy", "Default"].iter().any(|s| p.is_ident(s))).collect();
    let derive_attr = if derives.is_empty() { quote!() } else { quote!(#[derive(#(#derives),*)]) };
    let def = match fields {
        Fields::Named(_) => quote! {
            #[doc = #struct_doc]
            #[repr(C)]
            #derive_attr
            #vis struct #companion #def_lt #def_params #def_gt #where_g { #(#def_fields,)* }
        },
        Fields::Unnamed(_) => quote! {
            #[doc = #struct_doc]
            #[repr(C)]
            #derive_attr
            #vis struct #companion #def_lt #def_params #def_gt ( #(#def_fields,)* ) #where_g;
        },
        Fields::Unit => quote! {
            #[doc = #struct_doc]
            #[repr(C)]
            #derive_attr
            #vis struct #companion #def_lt #def_params #def_gt #where_g;
        },
    };

    // Persistent for the companion.
    let members: Vec<Member> = fields_info
        .iter()
        .map(|(access, label, f, ty)| Member {
            access: access.clone(),
            label: label.clone(),
            ty: syn::parse2(p_ty(ty)).expect("a type"),
            cfgs: cfgs_of(f),
        })
        .collect();
    let base_name = match &opts.type_name {
        Some(l) => quote!(#l),
        None => quote!(concat!(module_path!(), "::", stringify!(#companion))),
    };
    let name_params: Vec<TokenStream2> = input
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => {
                let t = &t.ident;
                Some(quote!(<<#t as ::engram::stm::Persist>::P as ::engram::Persistent>::type_name()))
            }
            GenericParam::Const(c) => {
                let c = &c.ident;
                Some(quote!(::std::string::ToString::to_string(&#c)))
            }
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    let persistent = persistent_impl(&companion, &generics, &members, base_name, name_params, false);

    // Persist for the struct.
    let persist_fields = fields_info.iter().map(|(m, _, f, ty)| {
        let cfgs = cfgs_of(f);
        quote_spanned!(ty.span()=> #(#cfgs)* #m: ::engram::stm::Persist::persist(&self.#m, __engram_cx)?)
    });
    let plain_fields = fields_info.iter().map(|(m, _, f, ty)| {
        let cfgs = cfgs_of(f);
        quote_spanned!(ty.span()=> #(#cfgs)* #m: ::engram::stm::Persist::plain(&self.#m)?)
    });

    Ok(quote! {
        #def

        impl #impl_g ::core::clone::Clone for #companion #ty_g #where_g {
            #[inline]
            fn clone(&self) -> Self { *self }
        }
        impl #impl_g ::core::marker::Copy for #companion #ty_g #where_g {}
        impl #impl_g ::core::default::Default for #companion #ty_g #where_g {
            /// All zero: null pointers, `None`, zero numbers.
            fn default() -> Self {
                // SAFETY: the companion is Persistent (impl below), so every
                // bit pattern of it, all zero included, is a valid value.
                unsafe { ::core::mem::zeroed() }
            }
        }

        #persistent

        impl #impl_g ::engram::stm::Persist for #companion #ty_g #where_g {
            type P = Self;
            fn persist(&self, _: &mut ::engram::stm::CopyCx<'_>) -> ::engram::Result<Self> {
                ::core::result::Result::Ok(*self)
            }
            fn plain(&self) -> ::core::option::Option<Self> {
                ::core::option::Option::Some(*self)
            }
        }

        impl #impl_g ::engram::stm::Persist for #ident #ty_g #where_g {
            type P = #companion #ty_g;
            fn persist(&self, __engram_cx: &mut ::engram::stm::CopyCx<'_>) -> ::engram::Result<Self::P> {
                let _ = &__engram_cx;
                ::core::result::Result::Ok(#companion { #(#persist_fields,)* })
            }
            fn plain(&self) -> ::core::option::Option<Self::P> {
                ::core::option::Option::Some(#companion { #(#plain_fields,)* })
            }
        }
    })
}

/// Derives the transactional accessors of a struct shared as `Arc<Self>`
/// (`engram::stm::TField`, the volatile STM's embedded fields): for every
/// field `x` whose type is an `engram::stm::TCell` (`TField<T>`, or a
/// `TVar<T>`, or a generic cell type), `fn x(self: &Arc<Self>, tx) ->
/// StmResult<T>` and `fn set_x(self: &Arc<Self>, tx, v: T) ->
/// StmResult<()>`. Fields marked `#[immutable]` are left plain: set before
/// the struct is shared, read directly, with no lock word and no read-set
/// entry (keys). Named fields only.
#[proc_macro_derive(TStruct, attributes(immutable))]
pub fn derive_tstruct(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_tstruct(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_tstruct(input: DeriveInput) -> syn::Result<TokenStream2> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(input.ident.span(), "TStruct: only structs have transactional fields"));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new(input.ident.span(), "TStruct: the struct needs named fields"));
    };
    let mut methods = Vec::new();
    for f in &named.named {
        if f.attrs.iter().any(|a| a.path().is_ident("immutable")) {
            continue;
        }
        let id = f.ident.clone().expect("named field");
        let ty = &f.ty;
        let vis = &f.vis;
        let set = format_ident!("set_{}", id);
        let value = quote_spanned!(ty.span()=> <#ty as ::engram::stm::TCell>::Value);
        let get_doc = format!("Reads `{id}` in `tx`.");
        let set_doc = format!("Writes `{id}` in `tx` (visible to others when `tx` commits).");
        methods.push(quote! {
            #[doc = #get_doc]
            #[allow(dead_code)]
            #vis fn #id(self: &::std::sync::Arc<Self>, tx: &::engram::stm::STx<'_>) -> ::engram::stm::StmResult<#value> {
                ::engram::stm::TCell::get(&self.#id, tx, self)
            }
            #[doc = #set_doc]
            #[allow(dead_code)]
            #vis fn #set(self: &::std::sync::Arc<Self>, tx: &::engram::stm::STx<'_>, v: #value) -> ::engram::stm::StmResult<()> {
                ::engram::stm::TCell::set(&self.#id, tx, self, v)
            }
        });
    }
    let ident = &input.ident;
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    let mut preds: Vec<WherePredicate> = where_g.map(|w| w.predicates.iter().cloned().collect()).unwrap_or_default();
    preds.push(parse_quote!(Self: ::core::marker::Send + ::core::marker::Sync + 'static));
    Ok(quote! {
        impl #impl_g #ident #ty_g where #(#preds,)* {
            #(#methods)*
        }
    })
}
